// The process runtime's CRIU whole state in the cgroup v2 guest (where `criu check` passes): an unsandboxed
// container counting 1..N and exiting 5 is frozen (as a reclaim freezes it), saved through wholeState.save,
// and restored through wholeState.restore in another work dir, its old one gone (as on another instance);
// then saved and restored once more. The old handles report the checkpoint (not a kill); the output of the
// three runs is exactly 1..N, with no restart; the exit code is the command's own (5), which only the
// wrapper inside the dumped tree knows; the restored tree's cgroup has its own attempt's (larger) memory
// limit. A restore of the first checkpoint while its restored tree runs
// fails (its pids are taken) and cleans up.
import assert from 'node:assert/strict';
import { lstat, mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CGROUP_PARENT, CGROUP_ROOT } from '../../src/agent/runtimes/cgroup.js';
import { ProcessRuntime } from '../../src/agent/runtimes/process.js';
import type { RunHandle } from '../../src/agent/runtimes/types.js';
import { TIME_SCALE, type Measured } from '../agent/cases.js';
import { waitFor } from '../agent/helpers.js';

export const CRIU_PROCESS_CASE =
  'criu: an unsandboxed process container saved whole and restored in another work dir counts on to its end and exits with its own code';

const N = 40;

async function lines(file: string): Promise<number[]> {
  const text = await readFile(file, 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter((l) => l !== '')
    .map(Number);
}

export async function criuProcessCase(): Promise<Measured> {
  const ms = 60_000 * TIME_SCALE;
  const rt = new ProcessRuntime(undefined, { sandbox: 'none', criu: 'criu', criuTimeoutMs: ms });
  assert.equal(await rt.probeWholeState(), null, 'probeWholeState()');
  const whole = rt.wholeState;
  assert.ok(whole, 'wholeState set');
  const dir = await mkdtemp(join(tmpdir(), 'berth-criu-process-'));
  const gone = (path: string) =>
    lstat(path).then(
      () => 'there',
      () => 'gone',
    );
  try {
    const w = (n: number) => join(dir, `w${n}`);
    for (const n of [1, 2, 3, 4]) await mkdir(w(n));
    const spec = {
      image: null,
      command: [
        '/bin/sh',
        '-c',
        `i=0; while [ $i -lt ${N} ]; do i=$((i+1)); echo $i; sleep 0.1; done; exit 5`,
      ],
      env: {},
      vcpus: 1,
      ram: 256 * 1024 * 1024,
      scratch: 0,
      gpus: 0,
    };
    /** Freezes `h` (as a reclaim does), saves it to `to`, checks its end, and returns what it printed. */
    const saveFrozen = async (h: RunHandle, workDir: string, to: string) => {
      await h.freeze();
      const saved = await whole.save(h, to);
      const ended = await h.wait();
      assert.equal(ended.exitCode, null, `the saved run's exit code (${JSON.stringify(ended)})`);
      assert.equal(ended.reason, `checkpointed to ${to}`, "the saved run's reason");
      const printed = await lines(join(workDir, 'stdout'));
      // Another instance: the old work dir is not there (a restore puts a symlink at its path a while).
      await rm(workDir, { recursive: true, force: true });
      return { saved, printed };
    };
    const first = await rt.start({ ...spec, id: 'criu-process-1', workDir: w(1) });
    await waitFor(async () => (await lines(join(w(1), 'stdout'))).length >= 5, ms, 'the count to reach 5');
    const one = await saveFrozen(first, w(1), join(dir, 'checkpoint-1'));
    const t0 = performance.now();
    // The next attempt asks for more memory: the restored tree's cgroup has that attempt's limit.
    const grown = { ...spec, id: 'criu-process-2', workDir: w(2), ram: 320 * 1024 * 1024 };
    const second = await whole.restore(grown, join(dir, 'checkpoint-1'));
    const restoreMs = performance.now() - t0;
    assert.equal(
      Number(await readFile(join(CGROUP_ROOT, CGROUP_PARENT, grown.id, 'memory.max'), 'utf8')),
      grown.ram,
      "the restored tree's memory.max (its own attempt's request)",
    );
    assert.equal(await gone(w(1)), 'gone', 'the symlink at the old work dir after the restore');
    // Its pids are taken now: another restore of the same checkpoint fails, naming criu's error, and
    // leaves nothing behind (no cgroup: the guest's harness checks; no symlink at the old path).
    const refused = await whole
      .restore({ ...spec, id: 'criu-process-3', workDir: w(3) }, join(dir, 'checkpoint-1'))
      .then(
        () => 'restored',
        (err: Error) => err.message,
      );
    assert.match(refused, /^criu restore failed: /, 'a restore whose pids are taken');
    assert.equal(await gone(w(1)), 'gone', 'the symlink after a failed restore');
    // The restored container is saved again (its files now in w2) and restored in a third work dir.
    await waitFor(
      async () => (await lines(join(w(2), 'stdout'))).length >= 3,
      ms,
      'the restored count to go on by 3',
    );
    const two = await saveFrozen(second, w(2), join(dir, 'checkpoint-2'));
    const third = await whole.restore(
      { ...spec, id: 'criu-process-4', workDir: w(4) },
      join(dir, 'checkpoint-2'),
    );
    const info = await third.wait();
    const after = await lines(join(w(4), 'stdout'));
    assert.equal(info.exitCode, 5, `the restored run's exit code (${JSON.stringify(info)})`);
    assert.equal(await readFile(join(w(4), 'stderr'), 'utf8'), '', "the restored run's stderr");
    assert.ok(after.length > 0, 'the twice restored run counted on');
    assert.deepEqual(
      [...one.printed, ...two.printed, ...after],
      Array.from({ length: N }, (_, i) => i + 1),
      'the output of the three runs is 1..N: no restart, no gap',
    );
    return {
      saveMs: Math.round(one.saved.ms),
      savedBytes: one.saved.bytes,
      restoreMs: Math.round(restoreMs),
      secondSaveMs: Math.round(two.saved.ms),
      counts: `${one.printed.length}+${two.printed.length}+${after.length}`,
      refused,
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
