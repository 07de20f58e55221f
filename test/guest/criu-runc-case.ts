// The runc runtime's CRIU whole state in the cgroup v2 guest (where `criu check` passes): a runc container
// (the host's network: runc whole state needs it) counting 1..N to its stdout, to its stderr and to a file
// it holds open in its writable layer, and exiting 5, is frozen (as a reclaim freezes it), saved through
// wholeState.save (`runc checkpoint`), and restored through wholeState.restore (`runc restore`) in another
// work dir, its old one gone (as on another instance); then saved and restored once more. The old handles
// report the checkpoint (not a kill); the output of the three runs is exactly 1..N on both streams, with
// no restart; the file in the writable layer holds 1..N; the exit code is the command's own (5); each
// restored container is in its own new cgroup with its own attempt's memory limit (each asks for more). A save that runc cannot write
// fails naming runc's error, and the container runs on unchanged.
import assert from 'node:assert/strict';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CGROUP_ROOT } from '../../src/agent/runtimes/cgroup.js';
import { RUNC_CRIU_NETWORK, RuncRuntime } from '../../src/agent/runtimes/runc.js';
import type { RunHandle, RunSpec } from '../../src/agent/runtimes/types.js';
import { TIME_SCALE, type Measured } from '../agent/cases.js';
import { TEST_ROOTFS_TAR, spec, track, waitFor, waitForOutput } from '../agent/helpers.js';

export const CRIU_RUNC_CASE =
  'criu: a runc container saved whole and restored in another work dir counts on to its end with its files, limits and exit code';

const N = 40;
const RAM = 96 * 1024 * 1024;

async function lines(file: string): Promise<string[]> {
  const text = await readFile(file, 'utf8').catch(() => '');
  return text.split('\n').filter((l) => l !== '');
}

/** The memory limit and member count of container `id`'s cgroup (runc makes it: berth/<id>). */
async function cgroupOf(id: string): Promise<{ max: number; procs: number }> {
  const dir = join(CGROUP_ROOT, 'berth', id);
  const max = Number((await readFile(join(dir, 'memory.max'), 'utf8')).trim());
  const procs = (await readFile(join(dir, 'cgroup.procs'), 'utf8')).split('\n').filter(Boolean).length;
  return { max, procs };
}

export async function criuRuncCase(): Promise<Measured> {
  const ms = 60_000 * TIME_SCALE;
  const criuOpts = { criu: 'criu', criuTimeoutMs: ms };
  // Its own network namespace: refused, saying why, before criu is asked.
  const own = new RuncRuntime(undefined, undefined, undefined, 'none', undefined, criuOpts);
  assert.equal(await own.probeWholeState(), RUNC_CRIU_NETWORK, 'probeWholeState() with network none');
  const rt = new RuncRuntime(undefined, undefined, undefined, 'host', undefined, criuOpts);
  assert.equal(await rt.probeWholeState(), null, 'probeWholeState()');
  const whole = rt.wholeState;
  assert.ok(whole, 'wholeState set');

  const specs: RunSpec[] = [];
  for (let i = 0; i < 3; i++)
    specs.push(
      await spec(
        TEST_ROOTFS_TAR,
        [
          '/bin/sh',
          '-c',
          `exec 3>>/count; i=0; while [ $i -lt ${N} ]; do i=$((i+1)); echo $i; echo e$i >&2; echo $i >&3; sleep 0.1; done; exit 5`,
        ],
        // Each attempt asks for more memory than the last: a restore takes its own attempt's limit.
        { ram: RAM + i * 16 * 1024 * 1024 },
      ),
    );
  const [s1, s2, s3] = specs as [RunSpec, RunSpec, RunSpec];
  /** Freezes `h` (as a reclaim does), saves it to `to`, checks its end; what it printed; its old dir gone. */
  const saveFrozen = async (h: RunHandle, workDir: string, to: string) => {
    await h.freeze();
    const saved = await whole.save(h, to);
    const ended = await h.wait();
    assert.equal(ended.exitCode, null, `the saved run's exit code (${JSON.stringify(ended)})`);
    assert.equal(ended.reason, `checkpointed to ${to}`, "the saved run's reason");
    const printed = { out: await lines(join(workDir, 'stdout')), err: await lines(join(workDir, 'stderr')) };
    await rm(workDir, { recursive: true, force: true });
    return { saved, printed };
  };
  const restoreAs = async (s: RunSpec, from: string) => {
    const t0 = performance.now();
    const h = track(await whole.restore(s, from));
    const restoreMs = performance.now() - t0;
    const cg = await cgroupOf(s.id);
    assert.equal(cg.max, s.ram, "the restored container's memory.max (its own attempt's request)");
    assert.ok(cg.procs > 0, 'the restored container is in its new cgroup');
    await rm(from, { recursive: true, force: true });
    return { h, restoreMs };
  };

  const first = track(await rt.start(s1));
  await waitFor(
    async () => (await lines(join(s1.workDir, 'stdout'))).length >= 5,
    ms,
    'the count to reach 5',
  );
  const one = await saveFrozen(first, s1.workDir, `${s1.workDir}-whole`);
  const second = await restoreAs(s2, `${s1.workDir}-whole`);
  await waitFor(
    async () => (await lines(join(s2.workDir, 'stdout'))).length >= 3,
    ms,
    'the restored count to go on by 3',
  );
  const two = await saveFrozen(second.h, s2.workDir, `${s2.workDir}-whole`);
  const third = await restoreAs(s3, `${s2.workDir}-whole`);
  const info = await third.h.wait();
  assert.equal(info.exitCode, 5, `the restored run's exit code (${JSON.stringify(info)})`);
  const after = {
    out: await lines(join(s3.workDir, 'stdout')),
    err: await lines(join(s3.workDir, 'stderr')),
  };
  assert.ok(after.out.length > 0, 'the twice restored run counted on');
  const all = Array.from({ length: N }, (_, i) => String(i + 1));
  assert.deepEqual(
    [...one.printed.out, ...two.printed.out, ...after.out],
    all,
    'stdout of the three runs is 1..N: no restart, no gap',
  );
  assert.deepEqual(
    [...one.printed.err, ...two.printed.err, ...after.err],
    all.map((n) => `e${n}`),
    'stderr of the three runs is e1..eN',
  );
  assert.deepEqual(await lines(join(s3.workDir, 'scratch', 'count')), all, 'the file in its writable layer');
  // A checkpoint runc cannot write (a file where its images go): the save fails naming runc's error, and
  // the container runs on where it stood.
  const held = await spec(TEST_ROOTFS_TAR, [
    '/bin/sh',
    '-c',
    'i=0; while :; do i=$((i+1)); echo $i; sleep 0.1; done',
  ]);
  const running = track(await rt.start(held));
  await waitForOutput(running, '3', ms);
  await running.freeze();
  const blocked = `${held.workDir}-whole`;
  await mkdir(blocked);
  await writeFile(join(blocked, 'images'), 'not a directory');
  const refusal = await whole.save(running, blocked).then(
    () => 'saved',
    (err: Error) => err.message,
  );
  await rm(blocked, { recursive: true, force: true });
  assert.match(refusal, /^runc checkpoint failed: .*not a directory/, `a save runc cannot do: ${refusal}`);
  const before = (await lines(join(held.workDir, 'stdout'))).length;
  await running.thaw();
  await waitFor(
    async () => (await lines(join(held.workDir, 'stdout'))).length >= before + 3,
    ms,
    'the refused container to count on',
  );
  await running.signal('SIGKILL');
  const heldEnd = await running.wait();
  assert.equal(heldEnd.exitCode, 137, `the refused container's end (${JSON.stringify(heldEnd)})`);
  const counted = await lines(join(held.workDir, 'stdout'));
  assert.deepEqual(
    counted,
    counted.map((_, i) => String(i + 1)),
    'the refused container was not restarted',
  );

  return {
    saveMs: Math.round(one.saved.ms),
    savedBytes: one.saved.bytes,
    restoreMs: Math.round(second.restoreMs),
    secondSaveMs: Math.round(two.saved.ms),
    secondRestoreMs: Math.round(third.restoreMs),
    counts: `${one.printed.out.length}+${two.printed.out.length}+${after.out.length}`,
    refusal,
  };
}
