import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { RuncRuntime } from '../../src/agent/runtimes/runc.js';
import { runtimeConformance } from './conformance.js';
import { TEST_ROOTFS_TAR, rootfsMissing } from './helpers.js';

const runtime = new RuncRuntime();
runtimeConformance(runtime, TEST_ROOTFS_TAR, (await runtime.available()) ?? rootfsMissing(), {
  ended: async (_id, workDir) => existsSync(join(workDir, 'exit')),
});
