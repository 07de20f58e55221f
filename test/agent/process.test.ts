import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ProcessRuntime } from '../../src/agent/runtimes/process.js';
import { runtimeConformance } from './conformance.js';
import { isRoot } from './helpers.js';

runtimeConformance(new ProcessRuntime(), null, isRoot ? null : 'not root: cgroup limits need root', {
  ended: async (_id, workDir) => existsSync(join(workDir, 'exit')),
});
