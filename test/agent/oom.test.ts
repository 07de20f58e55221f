// Issue 10 item 14 at the runtime: a child killed for memory while the main process exits 0 is reported
// as exit 0 with oomKilled, on a real cgroup (process and runc; docker and podman report only the main
// process's OOM: docs/RUNTIMES.md).
import { afterEach, describe, expect } from 'vitest';
import { ProcessRuntime } from '../../src/agent/runtimes/process.js';
import { RuncRuntime } from '../../src/agent/runtimes/runc.js';
import type { Runtime } from '../../src/agent/runtimes/types.js';
import { itIf } from '../helpers/needs.js';
import {
  TEST_ROOTFS_TAR,
  cleanupHandles,
  cleanupWorkDirs,
  collect,
  isRoot,
  leftovers,
  rootfsMissing,
  spec,
  track,
} from './helpers.js';

const MiB = 1024 * 1024;
const runc = new RuncRuntime();
const cases: [Runtime, string | null, string | null][] = [
  [new ProcessRuntime(), null, isRoot ? null : 'not root: cgroup limits need root'],
  [runc, TEST_ROOTFS_TAR, (await runc.available()) ?? rootfsMissing()],
];

afterEach(async () => {
  await cleanupHandles();
  const left = await leftovers();
  await cleanupWorkDirs();
  expect(left).toEqual([]);
});

describe('a child OOM-killed while the main process exits 0', () => {
  for (const [rt, image, missing] of cases)
    itIf(missing)(`${rt.name}: exit code 0 and oomKilled`, async () => {
      const h = track(
        await rt.start(
          await spec(image, ['/bin/sh', '-c', 'head -c 300m /dev/zero | tail; echo "survived $?"; exit 0'], {
            ram: 64 * MiB,
          }),
        ),
      );
      const [out, info] = await Promise.all([collect(h), h.wait()]);
      expect(out.stdout).toBe('survived 137\n');
      expect(info.exitCode).toBe(0);
      expect(info.oomKilled).toBe(true);
    });
});
