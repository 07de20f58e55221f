// A shim's exit is awaited in a process that has nothing else to keep it up (the shim's child is unref'd).
// Found by CI's cgroup v2 guest run: its harness ended with exit 13 (a top-level await never settled) when a
// runc container's shim had written its exit code and not yet exited.
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';

const FIXTURE = fileURLToPath(new URL('./fixtures/wait-alone.ts', import.meta.url));
const VITE_NODE = fileURLToPath(new URL('../../node_modules/vite-node/vite-node.mjs', import.meta.url));

describe('ShimHandle.wait in a process with nothing else to do', () => {
  const dirs: string[] = [];
  afterEach(async () => {
    for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
  });

  it('settles when the shim exits after writing its exit code, instead of the process ending first', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'berth-shim-wait-'));
    dirs.push(dir);
    const { stdout } = await promisify(execFile)(process.execPath, [VITE_NODE, FIXTURE, dir], {
      timeout: 60_000,
    });
    // "true": the shim still ran when the wait began, so the case was the one the fix is for.
    expect(stdout.trim()).toBe('done true 0');
  }, 90_000);
});
