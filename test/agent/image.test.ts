// Image resolution and the errors the agent maps to cancelled `perm` / `temp`, against the real tar,
// runc and docker daemon where present.
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DockerRuntime } from '../../src/agent/runtimes/docker.js';
import { ImageNotFoundError, RuntimeTransientError } from '../../src/agent/runtimes/errors.js';
import { classifyImage, ensureRootfs } from '../../src/agent/runtimes/image.js';
import { PodmanRuntime } from '../../src/agent/runtimes/podman.js';
import { ProcessRuntime } from '../../src/agent/runtimes/process.js';
import { RuncRuntime } from '../../src/agent/runtimes/runc.js';
import { RunSpecError } from '../../src/agent/runtimes/types.js';
import { itIf } from '../helpers/needs.js';
import { freezeCase } from './cases.js';
import {
  TEST_IMAGE,
  TEST_ROOTFS_TAR,
  cleanupHandles,
  cleanupWorkDirs,
  collect,
  leftovers,
  rootfsMissing,
  spec,
  track,
  waitFor,
  waitForOutput,
} from './helpers.js';

const docker = new DockerRuntime({ pull: false });
const dockerMissing = (await docker.available()) ?? rootfsMissing();
const podman = new PodmanRuntime({ pull: false });
const podmanMissing = (await podman.available()) ?? rootfsMissing();
const runc = new RuncRuntime();
const runcMissing = (await runc.available()) ?? rootfsMissing();

const cleanups: string[] = [];
afterEach(async () => {
  await cleanupHandles();
  const left = await leftovers();
  await cleanupWorkDirs();
  expect(left, 'cgroups, mounts or runc containers left behind').toEqual([]);
  while (cleanups.length) await rm(cleanups.pop()!, { recursive: true, force: true });
});

async function tempDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'berth-img-'));
  cleanups.push(d);
  return d;
}

describe('image references', () => {
  it.each([
    [null, { kind: 'none' }],
    ['', { kind: 'none' }],
    ['/srv/images/rootfs.tar', { kind: 'tarball', path: '/srv/images/rootfs.tar' }],
    ['/srv/images/rootfs.tar.gz', { kind: 'tarball', path: '/srv/images/rootfs.tar.gz' }],
    ['/srv/images/rootfs.tgz', { kind: 'tarball', path: '/srv/images/rootfs.tgz' }],
    ['debian:12', { kind: 'name', name: 'debian:12' }],
    [
      'registry.example.com:5000/team/tool@sha256:abc',
      { kind: 'name', name: 'registry.example.com:5000/team/tool@sha256:abc' },
    ],
  ])('%j is %j', (image, want) => {
    expect(classifyImage(image)).toEqual(want);
  });
});

describe('root-filesystem tarballs', () => {
  itIf(rootfsMissing())('are unpacked once into the cache and reused', async () => {
    const cache = await tempDir();
    const [a, b] = await Promise.all([
      ensureRootfs(TEST_ROOTFS_TAR, cache),
      ensureRootfs(TEST_ROOTFS_TAR, cache),
    ]);
    expect(a).toBe(b);
    const first = await stat(join(a, 'bin', 'busybox'));
    expect((await ensureRootfs(TEST_ROOTFS_TAR, cache)) === a).toBe(true);
    expect((await stat(join(a, 'bin', 'busybox'))).ino).toBe(first.ino);
    expect((await readdir(cache)).filter((n) => n.startsWith('.unpack'))).toEqual([]);
  });

  it('a gzipped tarball works too', async () => {
    const dir = await tempDir();
    await writeFile(join(dir, 'hello'), 'hi');
    const tgz = join(dir, 'rootfs.tar.gz');
    execFileSync('tar', ['-czf', tgz, '-C', dir, 'hello']);
    const root = await ensureRootfs(tgz, join(dir, 'cache'));
    expect((await stat(join(root, 'hello'))).size).toBe(2);
  });

  it('a missing or broken tarball is ImageNotFoundError (cancel perm)', async () => {
    const dir = await tempDir();
    const missing = ensureRootfs(join(dir, 'nope.tar'), dir);
    await expect(missing).rejects.toBeInstanceOf(ImageNotFoundError);
    await expect(missing).rejects.toMatchObject({ failureClass: 'perm' });
    const broken = join(dir, 'broken.tar');
    await writeFile(broken, 'this is not a tar archive');
    await expect(ensureRootfs(broken, join(dir, 'cache'))).rejects.toThrow(/cannot unpack/);
    expect(await readdir(join(dir, 'cache'))).toEqual([]);
  });
});

describe('runtime errors', () => {
  itIf(dockerMissing)(
    'docker: an image that is not present (pull disabled) is ImageNotFoundError',
    async () => {
      const s = await spec('berth-test-no-such-image:latest', ['true']);
      await expect(docker.start(s)).rejects.toBeInstanceOf(ImageNotFoundError);
    },
  );

  it('docker: an unreachable daemon is RuntimeTransientError (cancel temp) and not available', async () => {
    const gone = new DockerRuntime({ socketPath: '/nonexistent/docker.sock', pull: false });
    expect(await gone.available()).toMatch(/docker daemon not answering at \/nonexistent\/docker.sock/);
    const err = await gone.start(await spec(TEST_IMAGE, ['true'])).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RuntimeTransientError);
    expect(err).toMatchObject({ failureClass: 'temp' });
  });

  itIf(dockerMissing)('docker: a tarball the daemon cannot import is ImageNotFoundError', async () => {
    const dir = await tempDir();
    const broken = join(dir, 'broken.tar');
    await writeFile(broken, 'this is not a tar archive');
    const err = await docker.start(await spec(broken, ['true'])).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ImageNotFoundError);
    expect((err as Error).message).toMatch(/docker import/);
  });

  itIf(dockerMissing)('docker: runs a root-filesystem tarball by importing it', async () => {
    const h = track(await docker.start(await spec(TEST_ROOTFS_TAR, ['/bin/sh', '-c', 'echo from-tarball'])));
    const [out, info] = await Promise.all([collect(h), h.wait()]);
    expect(info.exitCode).toBe(0);
    expect(out.stdout).toBe('from-tarball\n');
  });

  itIf(podmanMissing)(
    'podman: runs a root-filesystem tarball by importing it; a missing image is ImageNotFoundError',
    async () => {
      const h = track(
        await podman.start(await spec(TEST_ROOTFS_TAR, ['/bin/sh', '-c', 'echo from-tarball'])),
      );
      const [out, info] = await Promise.all([collect(h), h.wait()]);
      expect(info.exitCode).toBe(0);
      expect(out.stdout).toBe('from-tarball\n');
      await expect(
        podman.start(await spec('berth-test-no-such-image:latest', ['true'])),
      ).rejects.toBeInstanceOf(ImageNotFoundError);
    },
  );

  itIf(runcMissing)('runc: an image name (not a tarball) is ImageNotFoundError', async () => {
    await expect(runc.start(await spec('debian:12', ['true']))).rejects.toBeInstanceOf(ImageNotFoundError);
  });

  it('bad specs are RunSpecError naming the field and what was expected', async () => {
    const p = new ProcessRuntime();
    await expect(p.start(await spec(null, ['true'], { ram: 1000 }))).rejects.toThrow(
      'ram: expected bytes, at least 4MiB, got 1000',
    );
    await expect(p.start(await spec(null, [], {}))).rejects.toThrow(
      'command: expected a non-empty list of strings, got []',
    );
    await expect(p.start(await spec(null, ['true'], { id: '../etc' }))).rejects.toThrow(
      /^id: expected letters/,
    );
    await expect(p.start(await spec(null, ['true'], { vcpus: 0 }))).rejects.toThrow(
      'vcpus: expected a number > 0, got 0',
    );
    await expect(p.start(await spec(null, ['true'], { env: { 'A=B': 'x' } }))).rejects.toThrow(
      /^env.A=B: expected/,
    );
    await expect(p.start(await spec('debian:12', ['true']))).rejects.toBeInstanceOf(RunSpecError);
    await expect(p.start(await spec(null, ['true'], { gpus: 1 }))).rejects.toThrow(/^gpus:/);
  });

  it('process: a command that does not exist exits 127 with the shell saying so', async () => {
    const h = track(await new ProcessRuntime().start(await spec(null, ['berth-no-such-command'])));
    const [out, info] = await Promise.all([collect(h), h.wait()]);
    expect(info.exitCode).toBe(127);
    expect(out.stderr).toMatch(/berth-no-such-command/);
  });
});

describe('process runtime without cgroup permission', () => {
  it('runs the container unlimited and says so in the warning', async () => {
    const noCgroups = await tempDir(); // no controllers here: as on a machine where we may not create cgroups
    const rt = new ProcessRuntime(noCgroups);
    const h = track(await rt.start(await spec(null, ['/bin/sh', '-c', 'echo still-runs; exit 5'])));
    expect(h.warning).toBe(
      `process runtime: cgroup v1 memory hierarchy not writable at ${noCgroups}/memory; running without CPU and memory limits`,
    );
    const [out, info] = await Promise.all([collect(h), h.wait()]);
    expect(info.exitCode).toBe(5);
    expect(out.stdout).toBe('still-runs\n');
    expect(info.oomKilled).toBe(false);
  });

  it('sandboxed: freeze stops the command (SIGSTOP) and thaw lets it count on (SIGCONT)', async () => {
    await freezeCase.run(new ProcessRuntime(await tempDir()), null);
  });

  it('unsandboxed ("none"): freeze stops the process group and thaw lets it count on', async () => {
    await freezeCase.run(new ProcessRuntime(await tempDir(), { sandbox: 'none' }), null);
  });

  it('unsandboxed ("none"): signals still reach the whole process group, background children included', async () => {
    const rt = new ProcessRuntime(await tempDir(), { sandbox: 'none' });
    const s = await spec(null, ['/bin/sh', '-c', 'sleep 30 & echo "bg $!"; sleep 30; wait']);
    const h = track(await rt.start(s));
    await waitForOutput(h, 'bg ');
    const out = await readFile(join(s.workDir, 'stdout'), 'utf8');
    const bg = Number(/bg (\d+)/.exec(out)![1]);
    await h.signal('SIGKILL');
    const info = await h.wait();
    expect(info.exitCode).toBe(137);
    // SIGKILL is delivered asynchronously: wait (with a deadline) for the child to die.
    const stateOf = () =>
      readFile(`/proc/${bg}/stat`, 'utf8').then(
        (t) => t.slice(t.lastIndexOf(')') + 2, t.lastIndexOf(')') + 3),
        () => 'gone',
      );
    let state = await stateOf();
    for (
      const deadline = Date.now() + 5000;
      !['gone', 'Z'].includes(state) && Date.now() < deadline;
      state = await stateOf()
    ) {
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(['gone', 'Z']).toContain(state);
  });

  it("usage comes from /proc for the container's processes, and the exit reports the sampled usage", async () => {
    const rt = new ProcessRuntime(await tempDir());
    const h = track(await rt.start(await spec(null, ['/bin/sh', '-c', 'while :; do :; done'])));
    let last = { cpuSeconds: 0, ramBytes: 0 };
    await waitFor(
      async () => {
        last = await h.usage();
        return last.cpuSeconds >= 0.2;
      },
      20_000,
      'the busy loop to use 0.2 CPU seconds',
    );
    expect(last.ramBytes).toBeGreaterThan(0);
    await h.signal('SIGKILL');
    const info = await h.wait();
    expect(info.exitCode).toBe(137);
    expect(info.cpuSeconds).toBeGreaterThanOrEqual(0.2);
    expect(info.peakRamBytes).toBeGreaterThan(0);
  });
});
