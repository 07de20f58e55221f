// When the runc runtime saves containers whole with `runc checkpoint` (runc-criu.ts): only when asked to
// (`runc_criu`), only where `criu check` passes (a passed check remembered beside the probe cache). This
// host's criu fails `criu check` (kernel 6.18), so stand-in `criu` executables pass the check here: then
// every container's stdio are pipes (the conformance suite runs through them), and a checkpoint or restore
// that runc cannot do (the stand-in does nothing else) fails naming runc's error and changes nothing. The
// save and restore themselves run in the guest, where criu works: test/guest/criu-runc-case.ts.
import { existsSync } from 'node:fs';
import { lstat, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { RUNC_CRIU_NETWORK, RuncRuntime } from '../../src/agent/runtimes/runc.js';
import { runcCheckpointRecord, runcError } from '../../src/agent/runtimes/runc-criu.js';
import { readRunState } from '../../src/agent/runtimes/shim.js';
import type { RunSpec } from '../../src/agent/runtimes/types.js';
import { itIf } from '../helpers/needs.js';
import { runtimeConformance } from './conformance.js';
import {
  TEST_ROOTFS_TAR,
  cleanupHandles,
  cleanupWorkDirs,
  collect,
  expectRealCriuProbe,
  leftovers,
  recordIn,
  rootfsMissing,
  spec,
  standInCriu,
  track,
  waitForOutput,
} from './helpers.js';

const temp: string[] = [];
afterEach(async () => {
  await Promise.all(temp.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

/** A stand-in criu that counts its runs, passes `check` and fails everything else (as `Error (x): …`). */
const standIn = () => standInCriu('[ "$1" = check ] && exit 0\necho "Error (x): stand-in" >&2\nexit 1', temp);

const runcWhy = (await new RuncRuntime().available()) ?? rootfsMissing();
/** A runc runtime in the host's network (runc whole state needs it: RUNC_CRIU_NETWORK) with `criu`. */
const runcRuntime = (criu: string | null, probeCache: string | null = null) =>
  new RuncRuntime(undefined, undefined, undefined, 'host', undefined, { criu, probeCache });

describe('RuncRuntime.wholeState', () => {
  itIf(runcWhy)('is absent unless asked for, saying why, without running criu', async () => {
    const unasked = runcRuntime(null);
    expect(await unasked.probeWholeState()).toBe('not asked for (runc_criu unset)');
    expect(unasked.wholeState).toBeUndefined();
    const s = await standIn();
    const own = new RuncRuntime(undefined, undefined, undefined, 'none', undefined, { criu: s.criu });
    expect(await own.probeWholeState()).toBe(RUNC_CRIU_NETWORK);
    expect(own.wholeState).toBeUndefined();
    expect(await s.runs()).toBe(0);
    const missing = runcRuntime(join(tmpdir(), 'no-such-criu'));
    expect(await missing.probeWholeState()).toMatch(/no-such-criu not found$/);
    expect(missing.wholeState).toBeUndefined();
  });

  itIf(runcWhy)(
    'is set where `criu check` passes; the pass is remembered in a file of its own; a failure is not',
    async () => {
      const s = await standIn();
      const rt = runcRuntime(s.criu, s.cache);
      expect(await rt.probeWholeState()).toBeNull();
      expect(rt.wholeState).toBeDefined();
      expect(await rt.probeWholeState()).toBeNull(); // probed once per runtime
      expect(await s.runs()).toBe(1);
      expect(existsSync(`${s.cache}.runc-criu`)).toBe(true);
      // Another agent on the node: remembered, not run again.
      const next = runcRuntime(s.criu, s.cache);
      expect(await next.probeWholeState()).toBeNull();
      expect(await s.runs()).toBe(1);
      // A check that fails is said, and probed again by the next runtime.
      await s.rewrite('echo "Error (criu/kerndat.c:1): vdso" >&2\nexit 1');
      const failing = runcRuntime(s.criu, s.cache);
      expect(await failing.probeWholeState()).toBe('criu check failed: Error (criu/kerndat.c:1): vdso');
      expect(failing.wholeState).toBeUndefined();
    },
  );

  itIf(runcWhy)(
    "follows this host's real `criu check` (which fails on kernel 6.18: no whole state, criu's error said)",
    async () => {
      await expectRealCriuProbe(runcRuntime('criu'));
    },
  );
});

describe("runc checkpoints' record and errors", () => {
  const good = {
    workDir: '/w/old',
    cgroup: 'berth/c-old',
    image: '/images/rootfs.tar',
    args: ['sh', '-c', 'true'],
    env: { A: '1' },
    cwd: '/',
    vcpus: 1,
    ram: 1 << 28,
    network: 'none',
  };
  const recordOf = (text: string | null) => recordIn(runcCheckpointRecord, 'runc.json', text, temp);

  it('accepts what save() writes and names the field that is wrong', async () => {
    expect(await recordOf(JSON.stringify(good))).toEqual(good);
    expect(await recordOf(null)).toBe('checkpoint: runc.json missing (not a runc checkpoint)');
    expect(await recordOf('{')).toBe('checkpoint: runc.json: expected JSON');
    expect(await recordOf(JSON.stringify({ ...good, workDir: 'rel' }))).toBe(
      'checkpoint: runc.json workDir: expected an absolute path, got "rel"',
    );
    expect(await recordOf(JSON.stringify({ ...good, cgroup: 'berth/../etc' }))).toBe(
      'checkpoint: runc.json cgroup: expected a cgroup path such as berth/c1, got "berth/../etc"',
    );
    expect(await recordOf(JSON.stringify({ ...good, args: [] }))).toBe(
      'checkpoint: runc.json args: expected a non-empty list of strings, got []',
    );
    expect(await recordOf(JSON.stringify({ ...good, env: { A: 1 } }))).toBe(
      'checkpoint: runc.json env: expected an object of strings, got {"A":1}',
    );
    expect(await recordOf(JSON.stringify({ ...good, ram: -1 }))).toBe(
      'checkpoint: runc.json ram: expected bytes > 0, got -1',
    );
    expect(await recordOf(JSON.stringify({ ...good, network: 'bridge' }))).toBe(
      'checkpoint: runc.json network: expected "none" or "host", got "bridge"',
    );
  });

  it("names CRIU's first error from its log, else runc's own message", () => {
    const log =
      '(00.1) Dumping\n(00.2) Error (criu/sk-inet.c:191): inet: Connected TCP socket\n(00.3) Error (x): y';
    const stderr = 'time="t" level=error msg="criu failed: type NOTIFY errno 0\\nlog file: /w/dump.log"\n';
    expect(runcError(log, stderr)).toBe('Error (criu/sk-inet.c:191): inet: Connected TCP socket');
    const restore =
      "(00.05) 1: Error (criu/files-reg.c:2131): Can't open file count\n(00.09) Error (criu/cr-restore.c:2537): Restoring FAILED.";
    expect(runcError(restore, stderr)).toBe("Error (criu/files-reg.c:2131): Can't open file count");
    expect(runcError('', stderr)).toBe('criu failed: type NOTIFY errno 0 log file: /w/dump.log');
    expect(runcError('', 'ERRO[0000] container does not exist\n')).toBe(
      'ERRO[0000] container does not exist',
    );
    expect(runcError('', '')).toBeNull();
  });
});

// A runtime whose whole state is on (its criu a stand-in that passes `check` and fails the rest).
const passing = await mkdtemp(join(tmpdir(), 'berth-runc-criu-ok-'));
afterAll(() => rm(passing, { recursive: true, force: true }));
await writeFile(
  join(passing, 'criu'),
  '#!/bin/sh\n[ "$1" = check ] && exit 0\necho "Error (x): stand-in criu" >&2\nexit 1\n',
  { mode: 0o755 },
);
const piped = runcRuntime(join(passing, 'criu'));
if (!runcWhy) await piped.probeWholeState();

runtimeConformance(piped, TEST_ROOTFS_TAR, runcWhy, {
  ended: async (_id, workDir) => existsSync(join(workDir, 'exit')),
});

describe('runc whole state where runc cannot checkpoint (a stand-in criu)', () => {
  afterEach(async () => {
    await cleanupHandles();
    await cleanupWorkDirs();
  });

  itIf(runcWhy)(
    "a failed checkpoint names runc's error and changes nothing: the container runs on to its own end",
    async () => {
      const whole = piped.wholeState!;
      const s = await spec(TEST_ROOTFS_TAR, [
        '/bin/sh',
        '-c',
        'echo ready; read line; echo "stdin: [$line]"; echo err >&2; i=0; while [ $i -lt 3 ]; do i=$((i+1)); echo $i; done; exit 7',
      ]);
      const h = track(await piped.start(s));
      await waitForOutput(h, 'ready');
      expect(JSON.parse((await readRunState(s.workDir))!.extra.criu!)).toMatchObject({
        image: TEST_ROOTFS_TAR,
        vcpus: 1,
        ram: s.ram,
        network: 'host',
      });
      await h.freeze();
      const dir = join(s.workDir, '..', `${s.id}-whole`);
      temp.push(dir);
      const err = await whole.save(h, dir).then(
        () => null,
        (e: Error) => e.message,
      );
      expect(err).toMatch(/^runc checkpoint failed: ./);
      expect(await lstat(join(s.workDir, 'moved')).catch(() => null)).toBeNull();
      await h.thaw();
      const [out, info] = await Promise.all([collect(h), h.wait()]);
      expect(info.exitCode).toBe(7);
      expect(info.reason).toBeUndefined();
      expect(out).toMatchObject({ stdout: 'ready\nstdin: []\n1\n2\n3\n', stderr: 'err\n' });
      expect(await leftovers()).toEqual([]);
    },
  );

  itIf(runcWhy)(
    "a failed restore names runc's error and leaves nothing behind (no runc container, cgroup, mount or scratch)",
    async () => {
      const whole = piped.wholeState!;
      const s = await spec(TEST_ROOTFS_TAR, ['/bin/true']);
      const old = await spec(TEST_ROOTFS_TAR, ['/bin/true']);
      const dir = await mkdtemp(join(tmpdir(), 'berth-runc-checkpoint-'));
      temp.push(dir);
      await mkdir(join(dir, 'images'));
      await mkdir(join(dir, 'layer', 'etc'), { recursive: true });
      await writeFile(join(dir, 'layer', 'etc', 'restored'), 'x');
      const { execFileSync } = await import('node:child_process');
      execFileSync('tar', ['-cf', join(dir, 'scratch.tar'), '-C', join(dir, 'layer'), '.']);
      await writeFile(
        join(dir, 'runc.json'),
        JSON.stringify({
          workDir: '/nonexistent/old-work-dir',
          cgroup: `berth/${old.id}`,
          image: TEST_ROOTFS_TAR,
          args: ['/bin/true'],
          env: {},
          cwd: '/',
          vcpus: 1,
          ram: s.ram,
          network: 'host',
        }),
      );
      // A checkpoint of another image or command than the attempt's is refused before anything is made.
      const refused = (x: RunSpec) =>
        whole.restore(x, dir).then(
          () => null,
          (e: Error) => e.message,
        );
      const other = await spec(TEST_ROOTFS_TAR, ['/bin/false']);
      expect(await refused(other)).toBe(
        'checkpoint: saved running ["/bin/true"], this attempt runs ["/bin/false"]',
      );
      expect(await refused({ ...other, command: ['/bin/true'], image: '/elsewhere/rootfs.tar' })).toBe(
        `checkpoint: saved from the image ${TEST_ROOTFS_TAR}, this attempt runs /elsewhere/rootfs.tar`,
      );
      expect(await leftovers()).toEqual([]);
      const err = await whole.restore(s, dir).then(
        () => null,
        (e: Error) => e.message,
      );
      expect(err).toMatch(/^runc restore failed: ./);
      expect(existsSync(join(s.workDir, 'scratch'))).toBe(false);
      expect(await leftovers()).toEqual([]);
      // Its old container's cgroup path is taken here (CRIU would restore into it): refused, nothing made.
      const taken = track(await piped.start({ ...old, command: ['/bin/sh', '-c', 'echo ready; sleep 100'] }));
      await waitForOutput(taken, 'ready');
      const s1 = await spec(TEST_ROOTFS_TAR, ['/bin/true']);
      expect(
        await whole.restore(s1, dir).then(
          () => null,
          (e: Error) => e.message,
        ),
      ).toBe(`checkpoint: its old cgroup berth/${old.id} exists on this instance (CRIU restores into it)`);
      expect(existsSync(join(s1.workDir, 'scratch'))).toBe(false);
      await taken.signal('SIGKILL');
      await taken.wait();
      // A checkpoint saved where the container network was another is refused before anything is made.
      await writeFile(
        join(dir, 'runc.json'),
        JSON.stringify({ ...JSON.parse(await readFile(join(dir, 'runc.json'), 'utf8')), network: 'none' }),
      );
      const s2 = await spec(TEST_ROOTFS_TAR, ['/bin/true']);
      expect(
        await whole.restore(s2, dir).then(
          () => null,
          (e: Error) => e.message,
        ),
      ).toBe("checkpoint: saved with container network none, this agent's is host");
      expect(await leftovers()).toEqual([]);
    },
  );
});
