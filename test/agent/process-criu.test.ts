// When the process runtime saves containers whole with CRIU (process-criu.ts): only when asked to, only
// unsandboxed, only where `criu check` passes (a passed check remembered beside the sandbox probe's cache).
// Stand-in `criu` executables count their runs; the real criu of this host fails `criu check` (kernel 6.18).
// Where whole state is on, every container runs under CRIU's wrapper (the dumped tree's root, which
// records the exit code): the runtime conformance suite runs through it here (a stand-in criu whose
// `check` passes; nothing is dumped). The save and restore themselves run in the guest, where criu works:
// test/guest/criu-process-case.ts.
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { awaitProcessRestore, checkpointRecord } from '../../src/agent/runtimes/process-criu.js';
import { ProcessRuntime } from '../../src/agent/runtimes/process.js';
import { readRunState } from '../../src/agent/runtimes/shim.js';
import { itIf } from '../helpers/needs.js';
import { runtimeConformance } from './conformance.js';
import {
  cleanupHandles,
  cleanupWorkDirs,
  collect,
  expectRealCriuProbe,
  isRoot,
  recordIn,
  spec,
  standInCriu,
  track,
  waitForOutput,
} from './helpers.js';

const temp: string[] = [];
afterEach(async () => {
  await Promise.all(temp.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

/** A stand-in criu that counts its runs and passes `check` (and anything else). */
const standIn = () => standInCriu('echo "Error (x): stand-in says 0" >&2\nexit 0', temp);

describe('ProcessRuntime.wholeState', () => {
  it('is absent unless asked for and unsandboxed, saying why, without running criu', async () => {
    const unasked = new ProcessRuntime(undefined, { sandbox: 'none' });
    expect(await unasked.probeWholeState()).toBe('not asked for (process_criu unset)');
    expect(unasked.wholeState).toBeUndefined();
    const s = await standIn();
    const sandboxed = new ProcessRuntime(undefined, { sandbox: 'bwrap', criu: s.criu, probeCache: s.cache });
    expect(await sandboxed.probeWholeState()).toBe(
      'process sandbox bwrap: CRIU saves only unsandboxed containers (process sandbox "none")',
    );
    expect(sandboxed.wholeState).toBeUndefined();
    const missing = new ProcessRuntime(undefined, { sandbox: 'none', criu: join(tmpdir(), 'no-such-criu') });
    expect(await missing.probeWholeState()).toMatch(/no-such-criu not found$/);
    expect(missing.wholeState).toBeUndefined();
    expect(await s.runs()).toBe(0);
  });

  it('is set where `criu check` passes; the pass is remembered per criu binary; a failure is not', async () => {
    const s = await standIn();
    const rt = new ProcessRuntime(undefined, { sandbox: 'none', criu: s.criu, probeCache: s.cache });
    expect(await rt.probeWholeState()).toBeNull();
    expect(rt.wholeState).toBeDefined();
    expect(await rt.probeWholeState()).toBeNull(); // probed once per runtime
    expect(await s.runs()).toBe(1);
    // Another agent on the node: remembered, not run again.
    const next = new ProcessRuntime(undefined, { sandbox: 'none', criu: s.criu, probeCache: s.cache });
    expect(await next.probeWholeState()).toBeNull();
    expect(next.wholeState).toBeDefined();
    expect(await s.runs()).toBe(1);
    // Another criu binary (here: one whose check fails) is another key: probed, and its failure said.
    await s.rewrite('echo "Error (criu/kerndat.c:1): vdso" >&2\nexit 1');
    const changed = new ProcessRuntime(undefined, { sandbox: 'none', criu: s.criu, probeCache: s.cache });
    expect(await changed.probeWholeState()).toBe('criu check failed: Error (criu/kerndat.c:1): vdso');
    expect(changed.wholeState).toBeUndefined();
    expect(await s.runs()).toBe(2);
    const again = new ProcessRuntime(undefined, { sandbox: 'none', criu: s.criu, probeCache: s.cache });
    expect(await again.probeWholeState()).not.toBeNull();
    expect(await s.runs()).toBe(3);
  });

  it("follows this host's real `criu check` (which fails on kernel 6.18: no whole state, criu's error said)", async () => {
    await expectRealCriuProbe(new ProcessRuntime(undefined, { sandbox: 'none', criu: 'criu' }));
  });
});

// A runtime whose whole state is on (its criu a stand-in that passes `check`).
const passing = await mkdtemp(join(tmpdir(), 'berth-process-criu-ok-'));
afterAll(() => rm(passing, { recursive: true, force: true }));
await writeFile(join(passing, 'criu'), '#!/bin/sh\nexit 0\n', { mode: 0o755 });
const wrapped = new ProcessRuntime(undefined, { sandbox: 'none', criu: join(passing, 'criu') });
await wrapped.probeWholeState();
const noRoot = isRoot ? null : 'not root: cgroup limits need root';

runtimeConformance(wrapped, null, noRoot, {
  ended: async (_id, workDir) => existsSync(join(workDir, 'exit')),
});

describe("process checkpoints' record and restore errors", () => {
  const good = { workDir: '/w/old', root: 4242 };
  const recordOf = (text: string | null) => recordIn(checkpointRecord, 'process.json', text, temp);

  it('accepts what save() writes and names the field that is wrong', async () => {
    expect(await recordOf(JSON.stringify(good))).toEqual(good);
    expect(await recordOf(null)).toBe('checkpoint: process.json missing (not a process checkpoint)');
    expect(await recordOf('{')).toBe('checkpoint: process.json: expected JSON');
    expect(await recordOf('null')).toBe(
      'checkpoint: process.json workDir: expected an absolute path, got undefined',
    );
    expect(await recordOf(JSON.stringify({ ...good, workDir: 'rel' }))).toBe(
      'checkpoint: process.json workDir: expected an absolute path, got "rel"',
    );
    expect(await recordOf(JSON.stringify({ ...good, root: 0 }))).toBe(
      'checkpoint: process.json root: expected a pid, got 0',
    );
  });

  it("a restore that ended names criu's first error (its log, then stderr), else what the work dir says", async () => {
    const failed = async (files: Record<string, string>) => {
      const work = await mkdtemp(join(tmpdir(), 'berth-process-restore-'));
      temp.push(work);
      for (const [f, text] of Object.entries(files)) await writeFile(join(work, f), text);
      return awaitProcessRestore(work, 60_000).then(
        () => 'restored',
        (e: Error) => e.message,
      );
    };
    expect(
      await failed({
        exit: '1\n',
        'criu-restore.log': '(00.01) note\n(00.05) 1: Error (criu/pie.c:7): pid 42 taken\n',
        stderr: 'Error (x): later\n',
      }),
    ).toBe('criu restore failed: Error (criu/pie.c:7): pid 42 taken');
    expect(await failed({ exit: '1\n', stderr: 'sh: 1: Error (y): from stderr\nlast\n' })).toBe(
      'criu restore failed: ended (exit 1) without restoring: last',
    );
    expect(await failed({ exit: '1\n', stderr: 'Error (y): from stderr\nlast\n' })).toBe(
      'criu restore failed: Error (y): from stderr',
    );
    expect(await failed({ 'criu.restored': '42\n' })).toBe('restored');
  });
});

describe('CRIU wrapper', () => {
  afterEach(async () => {
    await cleanupHandles();
    await cleanupWorkDirs();
  });

  itIf(noRoot)(
    "runs the command as its child, writes its exit code, and adds nothing to its output (no 'Killed')",
    async () => {
      expect(wrapped.wholeState).toBeDefined();
      const s = await spec(null, ['/bin/sh', '-c', 'echo "parent $PPID"; echo err >&2; exit 7']);
      const h = track(await wrapped.start(s));
      const [out, info] = await Promise.all([collect(h), h.wait()]);
      const root = (await readFile(join(s.workDir, 'criu.root'), 'utf8')).trim();
      expect(out).toMatchObject({ stdout: `parent ${root}\n`, stderr: 'err\n' });
      expect(info.exitCode).toBe(7);
      expect(await readFile(join(s.workDir, 'criu.code'), 'utf8')).toBe('7\n');
      expect(JSON.parse((await readRunState(s.workDir))!.extra.limits!)).toEqual({ vcpus: 1, ram: s.ram });

      const k = await spec(null, ['/bin/sh', '-c', 'echo ready; sleep 30']);
      const killed = track(await wrapped.start(k));
      await waitForOutput(killed, 'ready');
      await killed.signal('SIGKILL');
      const [kout, kinfo] = await Promise.all([collect(killed), killed.wait()]);
      expect(kinfo.exitCode).toBe(137);
      expect(kout).toMatchObject({ stdout: 'ready\n', stderr: '' });

      // The command killed by a signal alone (as an OOM kill would): the wrapper reports it, silently.
      const self = await spec(null, ['/bin/sh', '-c', 'echo ready; sleep 0.2; kill -9 $$']);
      const selfKilled = track(await wrapped.start(self));
      const [sout, sinfo] = await Promise.all([collect(selfKilled), selfKilled.wait()]);
      expect(sinfo.exitCode).toBe(137);
      expect(sout).toMatchObject({ stdout: 'ready\n', stderr: '' });

      // A TERM reaches the command (whose trap decides its code); the wrapper outlives it to report that.
      const t = await spec(null, [
        '/bin/sh',
        '-c',
        'trap "echo term; exit 4" TERM; echo ready; sleep 30 & wait',
      ]);
      const termed = track(await wrapped.start(t));
      await waitForOutput(termed, 'ready');
      await termed.signal('SIGTERM');
      const [tout, tinfo] = await Promise.all([collect(termed), termed.wait()]);
      expect(tinfo.exitCode).toBe(4);
      expect(tout).toMatchObject({ stdout: 'ready\nterm\n', stderr: '' });
    },
  );
});
