import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
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
