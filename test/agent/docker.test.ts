import { DockerApiError } from '../../src/agent/runtimes/docker-api.js';
import { DockerRuntime } from '../../src/agent/runtimes/docker.js';
import { runtimeConformance } from './conformance.js';
import { TEST_IMAGE } from './helpers.js';

const runtime = new DockerRuntime({ pull: false });
const inspect = async (id: string): Promise<{ State: { Running: boolean } } | null> =>
  runtime.api.call<{ State: { Running: boolean } }>({ path: `/containers/berth-${id}/json` }).catch((err) => {
    if (err instanceof DockerApiError && err.status === 404) return null;
    throw err;
  });

runtimeConformance(runtime, TEST_IMAGE, await runtime.available(), {
  ended: async (id) => (await inspect(id))?.State.Running === false,
  held: async (id) => (await inspect(id)) !== null,
});
