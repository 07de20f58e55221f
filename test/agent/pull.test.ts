// Issue 10 item 10: a missing image fails perm at once; an unreachable registry is tried a bounded number
// of times, then fails perm; the engine's own errors decide which (docker's HTTP status first). Against the
// real docker daemon and podman, with a fake registry (no registry is reachable from here) for "manifest
// unknown" and "the registry fails".
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DockerRuntime } from '../../src/agent/runtimes/docker.js';
import {
  ImageNotFoundError,
  ImagePullError,
  RegistryUnavailableError,
  RuntimeTransientError,
} from '../../src/agent/runtimes/errors.js';
import { PodmanRuntime } from '../../src/agent/runtimes/podman.js';
import { pullBounded } from '../../src/agent/runtimes/pull.js';
import { itIf } from '../helpers/needs.js';
import { fakeRegistry, type FakeRegistry } from '../helpers/registry.js';
import { cleanupWorkDirs, spec } from './helpers.js';

let reg: FakeRegistry;
let waits: number[] = [];
const policy = { delaysMs: [10, 20], sleep: async (ms: number) => void waits.push(ms) };
const docker = new DockerRuntime({ pullPolicy: policy });
const podman = new PodmanRuntime({ pullPolicy: policy });
const dockerMissing = await docker.available();
const podmanMissing = await podman.available();

beforeAll(async () => {
  reg = await fakeRegistry();
});
afterAll(async () => {
  await reg.close();
  await cleanupWorkDirs();
});

async function startError(rt: DockerRuntime | PodmanRuntime, image: string): Promise<Error> {
  waits = [];
  const err = await rt.start(await spec(image, ['true'])).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(Error);
  return err as Error;
}

describe('pullBounded', () => {
  it('retries only a registry that may come back, as often as the policy says, then fails perm', async () => {
    let calls = 0;
    const err = await pullBounded(
      'img',
      async () => {
        calls++;
        throw new RegistryUnavailableError('img', 'connection refused');
      },
      policy,
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ImagePullError);
    expect(err).toMatchObject({ failureClass: 'perm' });
    expect((err as Error).message).toMatch(/^image "img": the pull failed 3 times, .*connection refused$/);
    expect(calls).toBe(3);
    calls = 0;
    const missing = pullBounded(
      'img',
      async () => {
        calls++;
        throw new ImageNotFoundError('img', 'manifest unknown');
      },
      policy,
    );
    await expect(missing).rejects.toBeInstanceOf(ImageNotFoundError);
    expect(calls).toBe(1);
  });
});

describe('image pulls', () => {
  itIf(dockerMissing)('docker: a tag the registry does not have is perm at once', async () => {
    const err = await startError(docker, `${reg.host}/berth-no-such-image:1.0`);
    expect(err).toBeInstanceOf(ImageNotFoundError);
    expect(err.message).toMatch(/manifest unknown/);
    expect(waits).toEqual([]);
  });

  itIf(dockerMissing)('docker: a name that is not valid is perm at once', async () => {
    const err = await startError(docker, 'Not_A_Valid_Name:1');
    expect(err).toBeInstanceOf(ImageNotFoundError);
    expect(err.message).toMatch(/not a valid image name/);
  });

  itIf(dockerMissing)(
    'docker: an unreachable or failing registry is tried 3 times, then perm (never minutes of temp retries)',
    async () => {
      for (const image of ['127.0.0.1:1/nope:1.0', 'doesnotexist/nope:1.0']) {
        const err = await startError(docker, image);
        expect(err, image).toBeInstanceOf(ImagePullError);
        expect(err.message).toMatch(/the pull failed 3 times/);
        expect(waits).toEqual([10, 20]);
      }
      reg.fail = true;
      try {
        const err = await startError(docker, `${reg.host}/nope:1.0`);
        expect(err).toBeInstanceOf(ImagePullError);
      } finally {
        reg.fail = false;
      }
    },
  );

  it('docker: the daemon itself unreachable stays temp (the machine, not the image)', async () => {
    const gone = new DockerRuntime({ socketPath: '/nonexistent/docker.sock', pullPolicy: policy });
    const err = await startError(gone, 'doesnotexist/nope:1.0');
    expect(err).toBeInstanceOf(RuntimeTransientError);
    expect(waits).toEqual([]);
  });

  itIf(podmanMissing)(
    'podman: a short name that resolves to no registry, or an invalid name, is perm at once',
    async () => {
      for (const image of ['doesnotexist/nope:1.0', 'Not_A_Valid_Name:1']) {
        const err = await startError(podman, image);
        expect(err, image).toBeInstanceOf(ImageNotFoundError);
        expect(waits).toEqual([]);
      }
    },
  );

  itIf(podmanMissing)(
    'podman: an unreachable registry is tried a bounded number of times, then perm',
    async () => {
      const err = await startError(podman, 'docker.io/doesnotexist/nope:1.0');
      expect(err).toBeInstanceOf(ImagePullError);
      expect(waits).toEqual([10, 20]);
    },
  );
});
