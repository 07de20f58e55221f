// The process runtime's CRIU whole state in the cgroup v2 guest (where `criu check` passes): an unsandboxed
// container counting 1..N and exiting 5 is frozen (as a reclaim freezes it), saved through wholeState.save,
// and restored through wholeState.restore in another work dir, its old one gone (as on another instance).
// The old handle reports the checkpoint (not a kill); the output of both runs is exactly 1..N, with no
// restart; the exit code is the command's own (5), which only the wrapper inside the dumped tree knows.
// A second restore of the same checkpoint while the first runs fails (its pids are taken) and cleans up.
import assert from 'node:assert/strict';
import { lstat, mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProcessRuntime } from '../../src/agent/runtimes/process.js';
import { TIME_SCALE, type Measured } from '../agent/cases.js';
import { waitFor } from '../agent/helpers.js';

export const CRIU_PROCESS_CASE =
  'criu: an unsandboxed process container saved whole and restored in another work dir counts on to its end and exits with its own code';

const N = 30;

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
  try {
    const [w1, w2, saved] = [join(dir, 'w1'), join(dir, 'w2'), join(dir, 'checkpoint')];
    await mkdir(w1);
    await mkdir(w2);
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
    const first = await rt.start({ ...spec, id: 'criu-process-1', workDir: w1 });
    await waitFor(async () => (await lines(join(w1, 'stdout'))).length >= 5, ms, 'the count to reach 5');
    await first.freeze();
    const s = await whole.save(first, saved);
    const ended = await first.wait();
    assert.equal(ended.exitCode, null, `the saved run's exit code (${JSON.stringify(ended)})`);
    assert.equal(ended.reason, `checkpointed to ${saved}`, "the saved run's reason");
    const before = await lines(join(w1, 'stdout'));
    // Another instance: the old work dir is not there (the restore puts a symlink at its path for a while).
    await rm(w1, { recursive: true, force: true });
    const t0 = performance.now();
    const second = await whole.restore('criu-process-2', w2, saved);
    const restoreMs = performance.now() - t0;
    assert.equal(
      await lstat(w1).then(
        () => 'there',
        () => 'gone',
      ),
      'gone',
      'the symlink at the old work dir after the restore',
    );
    // Its pids are taken now: a second restore of the same checkpoint fails, naming criu's error, and
    // leaves nothing behind (no cgroup: the guest's harness checks; no symlink at the old path).
    const w3 = join(dir, 'w3');
    await mkdir(w3);
    const refused = await whole.restore('criu-process-3', w3, saved).then(
      () => 'restored',
      (err: Error) => err.message,
    );
    assert.match(refused, /^criu restore failed: /, 'a restore whose pids are taken');
    assert.equal(
      await lstat(w1).then(
        () => 'there',
        () => 'gone',
      ),
      'gone',
      'the symlink after a failed restore',
    );
    const info = await second.wait();
    const after = await lines(join(w2, 'stdout'));
    assert.equal(info.exitCode, 5, `the restored run's exit code (${JSON.stringify(info)})`);
    assert.equal(await readFile(join(w2, 'stderr'), 'utf8'), '', "the restored run's stderr");
    assert.ok(after.length > 0, 'the restored run counted on');
    assert.deepEqual(
      [...before, ...after],
      Array.from({ length: N }, (_, i) => i + 1),
      'the output of both runs is 1..N: no restart, no gap',
    );
    return {
      saveMs: Math.round(s.ms),
      savedBytes: s.bytes,
      restoreMs: Math.round(restoreMs),
      countAtSave: before.length,
      refused,
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
