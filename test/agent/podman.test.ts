import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { promisify } from 'node:util';
import { afterAll, expect } from 'vitest';
import { PodmanRuntime } from '../../src/agent/runtimes/podman.js';
import { runtimeConformance } from './conformance.js';
import { TEST_IMAGE } from './helpers.js';

const exec = promisify(execFile);
const runtime = new PodmanRuntime({ pull: false });
const state = async (id: string): Promise<string | null> =>
  exec('podman', ['container', 'inspect', '--format', '{{.State.Status}}', `berth-${id}`]).then(
    (r) => r.stdout.trim(),
    () => null,
  );

runtimeConformance(runtime, TEST_IMAGE, await runtime.available(), {
  ended: async (id) => (await state(id)) === 'exited',
  held: async (id) => (await state(id)) !== null,
});

// conmon writes an `oom` marker into its working directory when a container is OOM-killed (the conformance
// suite's OOM case): podman runs in the container's own directory, so nothing lands in the agent's (here,
// the checkout's root, where an empty `oom` file kept reappearing).
const strayBefore = existsSync('oom');
afterAll(() => {
  if (!strayBefore) expect(existsSync('oom'), 'an oom file in the working directory').toBe(false);
});
