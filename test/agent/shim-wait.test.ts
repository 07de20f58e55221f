// A shim's exit is awaited in a process that has nothing else to keep it up (the shim's child is unref'd).
// Found by CI's cgroup v2 guest run: its harness ended with exit 13 (a top-level await never settled) when a
// runc container's shim had written its exit code and not yet exited.
// And a shim killed by a signal before its handle was made (SLURM ending a job signals all its processes):
// the wait settles, and the container's processes left in its cgroup are killed and the cgroup removed.
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { cgroupsUnusable, containerCgroup, probeCgroups } from '../../src/agent/runtimes/cgroup.js';
import { isAlive, processRef } from '../../src/agent/runtimes/procfs.js';
import { ShimHandle } from '../../src/agent/runtimes/shim.js';
import { itIf } from '../helpers/needs.js';
import { isRoot } from './helpers.js';

const FIXTURE = fileURLToPath(new URL('./fixtures/wait-alone.ts', import.meta.url));
const VITE_NODE = fileURLToPath(new URL('../../node_modules/vite-node/vite-node.mjs', import.meta.url));

const noCgroups = isRoot ? await cgroupsUnusable() : 'not root: creating cgroups needs root';

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

  itIf(noCgroups)(
    'settles when the shim was killed by a signal before its handle was made, and empties and removes its cgroup',
    async () => {
      const dir = await mkdtemp(join(tmpdir(), 'berth-shim-wait-'));
      dirs.push(dir);
      const id = `shim-signalled-${process.pid}`;
      const group = containerCgroup(await probeCgroups(), id);
      await group.create({ vcpus: 1, ram: 64 * 1024 ** 2 });
      // What the shim had started, re-parented once the shim died: still in the container's group.
      const left = spawn('sleep', ['600'], { detached: true, stdio: 'ignore' });
      left.unref();
      await new Promise((resolve, reject) => left.once('spawn', resolve).once('error', reject));
      const leftRef = (await processRef(left.pid!))!;
      for (const f of group.procsFiles()) await writeFile(f, String(left.pid));
      try {
        const shim = spawn('/bin/sh', ['-c', 'sleep 600'], { detached: true, stdio: 'ignore' });
        shim.unref();
        await new Promise((resolve, reject) => shim.once('spawn', resolve).once('error', reject));
        const ref = (await processRef(shim.pid!))!;
        // SLURM's SIGTERM, before the agent had made the handle: its 'exit' event has passed.
        const exited = new Promise((r) => shim.once('exit', r));
        shim.kill('SIGTERM');
        await exited;
        expect(shim.signalCode).toBe('SIGTERM');
        const handle = new ShimHandle(
          {
            runtime: 'process',
            id,
            shim: ref,
            startedAt: Date.now(),
            cgroup: group.path,
            warning: null,
            extra: {},
          },
          dir,
          { cgroup: group, scratchDir: dir },
          shim,
        );
        let timer: NodeJS.Timeout | undefined;
        const info = await Promise.race([
          handle.wait(),
          new Promise<'unsettled'>((r) => (timer = setTimeout(() => r('unsettled'), 20_000))),
        ]);
        clearTimeout(timer);
        expect(info).not.toBe('unsettled');
        expect(info).toMatchObject({ exitCode: null });
        expect(await isAlive(leftRef)).toBe(false);
        expect((await group.dirs()).filter((d) => existsSync(d))).toEqual([]);
      } finally {
        if (await isAlive(leftRef)) process.kill(left.pid!, 'SIGKILL');
        await group.remove().catch(() => {});
      }
    },
    60_000,
  );
});
