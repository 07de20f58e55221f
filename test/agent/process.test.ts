import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect } from 'vitest';
import { ProcessRuntime } from '../../src/agent/runtimes/process.js';
import { readRunState } from '../../src/agent/runtimes/shim.js';
import { itIf } from '../helpers/needs.js';
import { runtimeConformance } from './conformance.js';
import { cleanupHandles, cleanupWorkDirs, isRoot, spec, track } from './helpers.js';

const runtime = new ProcessRuntime();
const noRoot = isRoot ? null : 'not root: cgroup limits need root';

runtimeConformance(runtime, null, noRoot, {
  ended: async (_id, workDir) => existsSync(join(workDir, 'exit')),
});

describe('process runtime shim', () => {
  afterEach(async () => {
    await cleanupHandles();
    await cleanupWorkDirs();
  });

  // The shim joins its group in its first line; on a loaded host that line may not have run when start()
  // returns, and whatever looks for the container by its group (destroy, the local driver) would miss it.
  itIf(noRoot)('when start() returns, the shim is in the container cgroup', async () => {
    const s = await spec(null, ['sleep', '30']);
    track(await runtime.start(s));
    const state = await readRunState(s.workDir);
    expect(state?.cgroup).toBeTruthy();
    const lines = await readFile(`/proc/${state!.shim.pid}/cgroup`, 'utf8');
    expect(lines).toMatch(new RegExp(`^(\\d+:memory|0:):/${state!.cgroup}$`, 'm'));
  });
});
