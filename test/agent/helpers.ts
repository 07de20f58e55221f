// Shared pieces of the runtime tests: work dirs that are always removed, output collection, waiting
// for a condition with a deadline, and where the test image built by scripts/build-test-image.sh lives.
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { expect } from 'vitest';
import { CGROUP_ROOT, containerCgroup, probeCgroups } from '../../src/agent/runtimes/cgroup.js';
import { criuUnusable } from '../../src/agent/runtimes/criu.js';
import {
  RunSpecError,
  type OutputChunk,
  type RunHandle,
  type RunSpec,
} from '../../src/agent/runtimes/types.js';

/** The known paths of scripts/build-test-image.sh. */
export const TEST_CACHE = process.env.BERTH_TEST_CACHE ?? '/var/cache/berth-test';
export const TEST_ROOTFS_TAR = join(TEST_CACHE, 'busybox-rootfs.tar');
export const TEST_IMAGE = 'berth-test-busybox:latest';

export function rootfsMissing(): string | null {
  return existsSync(TEST_ROOTFS_TAR) ? null : `${TEST_ROOTFS_TAR} missing (run scripts/build-test-image.sh)`;
}

export const isRoot = process.getuid?.() === 0;

/** Work dirs created by a test file; `cleanupWorkDirs` (in afterEach) removes them. */
const dirs: string[] = [];
export async function makeWorkDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'berth-rt-'));
  dirs.push(d);
  return d;
}
export async function cleanupWorkDirs(): Promise<void> {
  while (dirs.length) await rm(dirs.pop()!, { recursive: true, force: true });
}

/** A stand-in `criu` program: see standInCriu. */
export interface StandInCriu {
  criu: string;
  /** A probe cache file beside it (not made). */
  cache: string;
  /** How many times it ran. */
  runs: () => Promise<number>;
  /** Makes it run `body` instead (still counting its runs). */
  rewrite: (body: string) => Promise<void>;
}

/**
 * A stand-in `criu` (a shell script) that counts its runs, then runs `body` (shell, its arguments in $@),
 * in a new temp dir listed in `temp` for the test file to remove.
 */
export async function standInCriu(body: string, temp: string[]): Promise<StandInCriu> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-criu-stand-in-'));
  temp.push(dir);
  const criu = join(dir, 'criu');
  const count = join(dir, 'runs');
  const rewrite = async (b: string) => {
    await writeFile(criu, `#!/bin/sh\necho "$*" >> '${count}'\n${b}\n`);
    await chmod(criu, 0o755);
  };
  await rewrite(body);
  const runs = () =>
    readFile(count, 'utf8').then(
      (t) => t.split('\n').filter(Boolean).length,
      () => 0,
    );
  return { criu, cache: join(dir, 'probe.json'), runs, rewrite };
}

/**
 * That a runtime told to use this host's real `criu` follows what `criu check` says: whole state where it
 * passes, else none and criu's error (or `criu not found`) as the reason.
 */
export async function expectRealCriuProbe(rt: {
  probeWholeState(): Promise<string | null>;
  wholeState?: unknown;
}): Promise<void> {
  const real = await criuUnusable();
  const why = await rt.probeWholeState();
  if (real?.endsWith('not found')) expect(why).toBe('criu not found');
  else expect(why).toBe(real);
  expect(rt.wholeState === undefined).toBe(why !== null);
}

/**
 * What a runtime's checkpoint record reader `read` makes of a checkpoint dir (a new temp dir, listed in
 * `temp` for the test file to remove) holding `text` as `file` (null: no such file): the record, or the
 * message of the RunSpecError it threw (any other error fails the test).
 */
export async function recordIn<R>(
  read: (dir: string) => Promise<R>,
  file: string,
  text: string | null,
  temp: string[],
): Promise<R | string> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-record-'));
  temp.push(dir);
  if (text !== null) await writeFile(join(dir, file), text);
  return read(dir).catch((err: Error) => {
    if (!(err instanceof RunSpecError)) throw err;
    return err.message;
  });
}

/** Container ids handed out by `spec` in this test file (for the leak check). */
const ids: string[] = [];

/**
 * What a test left behind that the runtime should have removed: cgroups of its containers, mounts under
 * its work dirs, docker/runc containers of its ids. Checked after cleanup in every runtime test.
 */
export async function leftovers(held?: (id: string) => Promise<boolean>): Promise<string[]> {
  const left: string[] = [];
  const host = await probeCgroups();
  if (host.unusable === null)
    for (const id of ids)
      for (const dir of await containerCgroup(host, id).dirs())
        if (existsSync(dir)) left.push(`cgroup ${relative(CGROUP_ROOT, dir)}`);
  const mounts = await readFile('/proc/self/mounts', 'utf8');
  for (const d of dirs) if (mounts.includes(d)) left.push(`mount under ${d}`);
  for (const id of ids) if (existsSync(`/run/runc/berth-${id}`)) left.push(`runc container berth-${id}`);
  if (held)
    for (const id of ids) if (await held(id)) left.push(`container berth-${id} still held by the runtime`);
  ids.length = 0;
  return left;
}

let seq = 0;
/** A spec with test defaults: 1 vcpu, 256MiB, no scratch limit. */
export async function spec(
  image: string | null,
  command: string[],
  over: Partial<RunSpec> = {},
): Promise<RunSpec> {
  seq += 1;
  const id = `t${process.pid}-${Date.now().toString(36)}-${seq}`;
  ids.push(id);
  return {
    id,
    image,
    command,
    env: {},
    vcpus: 1,
    ram: 256 * 1024 * 1024,
    scratch: 0,
    gpus: 0,
    workDir: await makeWorkDir(),
    ...over,
  };
}

/** Everything a handle printed, per stream. */
export async function collect(
  h: RunHandle,
): Promise<{ stdout: string; stderr: string; chunks: OutputChunk[] }> {
  const parts = { stdout: [] as Buffer[], stderr: [] as Buffer[] };
  const chunks: OutputChunk[] = [];
  for await (const c of h.output()) {
    parts[c.stream].push(c.data);
    chunks.push(c);
  }
  return {
    stdout: Buffer.concat(parts.stdout).toString(),
    stderr: Buffer.concat(parts.stderr).toString(),
    chunks,
  };
}

/** Resolves once the handle's output contains `text`; rejects after `ms`. */
export async function waitForOutput(h: RunHandle, text: string, ms = 10_000): Promise<void> {
  const it = h.output()[Symbol.asyncIterator]();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), ms)));
  let seen = '';
  try {
    for (;;) {
      const r = await Promise.race([it.next(), timeout]);
      if (r === 'timeout' || r.done) break;
      seen += r.value.data.toString();
      if (seen.includes(text)) return;
    }
  } finally {
    clearTimeout(timer);
    void it.return?.(undefined);
  }
  throw new Error(
    `output did not contain ${JSON.stringify(text)} within ${ms} ms; got ${JSON.stringify(seen.slice(-200))}`,
  );
}

/** Handles started by a test; `cleanupHandles` (in afterEach) kills and reaps whatever still runs. */
const live: RunHandle[] = [];
export function track<T extends RunHandle>(h: T): T {
  live.push(h);
  return h;
}
export async function cleanupHandles(): Promise<void> {
  while (live.length) {
    const h = live.pop()!;
    let finished = false;
    const done = h.wait().then(
      () => (finished = true),
      () => (finished = true),
    );
    // Repeat: a container still being created may not have its processes in place for the first signal.
    for (const until = Date.now() + 20_000; !finished && Date.now() < until;) {
      await h.signal('SIGKILL').catch(() => {});
      await Promise.race([done, new Promise((r) => setTimeout(r, 200))]);
    }
  }
}

/** Polls `cond` until true; rejects after `ms`. */
export async function waitFor(
  cond: () => Promise<boolean> | boolean,
  ms: number,
  what: string,
): Promise<void> {
  const until = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > until) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
