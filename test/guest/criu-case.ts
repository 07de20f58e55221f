// CRIU in the cgroup v2 guest (Debian's 6.1 kernel, where Debian's CRIU 3.17 passes `criu check`; on the
// 6.18 host it does not): a counting shell loop is dumped (which ends it), a dump of a process that is gone
// fails with criu's error, and the restore goes on counting where it stood: its file holds exactly 1..N.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { criuDump, criuRestore, criuUnusable } from '../../src/agent/runtimes/criu.js';
import { TIME_SCALE, type Measured } from '../agent/cases.js';
import { waitFor } from '../agent/helpers.js';

export const CRIU_CASE =
  'criu: `criu check` passes, and a counting process dumped, killed and restored counts on from where it stood';

async function count(file: string): Promise<number[]> {
  const text = await readFile(file, 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter((l) => l !== '')
    .map(Number);
}

export async function criuCase(): Promise<Measured> {
  assert.equal(await criuUnusable(), null, 'criuUnusable()');
  const dir = await mkdtemp(join(tmpdir(), 'berth-criu-'));
  try {
    const file = join(dir, 'count');
    const images = join(dir, 'images');
    await mkdir(images);
    // Its output to a file (criu restores a regular file by its path; a pipe to this process it could not).
    const loop = `i=0; while [ $i -lt 100000 ]; do i=$((i+1)); echo $i >> ${file}; sleep 0.05; done`;
    const child = spawn('/bin/sh', ['-c', loop], { detached: true, stdio: 'ignore' });
    const ms = 30_000 * TIME_SCALE;
    await waitFor(async () => (await count(file)).length >= 3, ms, 'the loop to count to 3');
    const saved = await criuDump(child.pid!, images, { timeoutMs: ms });
    await waitFor(
      () => child.exitCode !== null || child.signalCode !== null,
      ms,
      'criu to end the dumped loop',
    );
    const before = (await count(file)).length;
    // A failed dump names criu's error, and changes nothing.
    await assert.rejects(
      criuDump(child.pid!, await mkdtemp(join(dir, 'gone-')), { timeoutMs: ms }),
      /criu dump failed: Error/,
    );
    const t0 = performance.now();
    const pid = await criuRestore(images, { timeoutMs: ms });
    const restoreMs = performance.now() - t0;
    assert.equal(pid, child.pid, 'the restored root keeps its pid');
    await waitFor(async () => (await count(file)).length >= before + 3, ms, 'the restored loop to count on');
    process.kill(pid, 'SIGKILL');
    const got = await count(file);
    assert.deepEqual(
      got,
      got.map((_, i) => i + 1),
      'the count is 1..N: no restart, no gap',
    );
    return {
      dumpMs: Math.round(saved.ms),
      imageBytes: saved.bytes,
      restoreMs: Math.round(restoreMs),
      countAtDump: before,
      countAfter: got.length,
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
