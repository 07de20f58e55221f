// When the process runtime saves containers whole with CRIU (process-criu.ts): only when asked to, only
// unsandboxed, only where `criu check` passes (a passed check remembered beside the sandbox probe's cache).
// Stand-in `criu` executables count their runs; the real criu of this host fails `criu check` (kernel 6.18).
// The save and restore themselves run in the guest, where criu works: test/guest/criu-process-case.ts.
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { criuUnusable } from '../../src/agent/runtimes/criu.js';
import { ProcessRuntime } from '../../src/agent/runtimes/process.js';

const temp: string[] = [];
afterEach(async () => {
  await Promise.all(temp.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

/** A stand-in criu that counts its runs and answers `check` with `exitCode`, and a cache file path. */
async function standIn(
  exitCode: number,
): Promise<{ criu: string; cache: string; runs: () => Promise<number> }> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-process-criu-'));
  temp.push(dir);
  const criu = join(dir, 'criu');
  const count = join(dir, 'runs');
  await writeFile(
    criu,
    `#!/bin/sh\necho "$*" >> '${count}'\necho "Error (x): stand-in says ${exitCode}" >&2\nexit ${exitCode}\n`,
  );
  await chmod(criu, 0o755);
  const runs = () =>
    readFile(count, 'utf8').then(
      (t) => t.split('\n').filter(Boolean).length,
      () => 0,
    );
  return { criu, cache: join(dir, 'probe.json'), runs };
}

describe('ProcessRuntime.wholeState', () => {
  it('is absent unless asked for and unsandboxed, saying why, without running criu', async () => {
    const unasked = new ProcessRuntime(undefined, { sandbox: 'none' });
    expect(await unasked.probeWholeState()).toBe('not asked for (process_criu unset)');
    expect(unasked.wholeState).toBeUndefined();
    const s = await standIn(0);
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
    const s = await standIn(0);
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
    await writeFile(
      s.criu,
      `#!/bin/sh\necho "$*" >> '${join(s.cache, '..', 'runs')}'\necho "Error (criu/kerndat.c:1): vdso" >&2\nexit 1\n`,
    );
    const changed = new ProcessRuntime(undefined, { sandbox: 'none', criu: s.criu, probeCache: s.cache });
    expect(await changed.probeWholeState()).toBe('criu check failed: Error (criu/kerndat.c:1): vdso');
    expect(changed.wholeState).toBeUndefined();
    expect(await s.runs()).toBe(2);
    const again = new ProcessRuntime(undefined, { sandbox: 'none', criu: s.criu, probeCache: s.cache });
    expect(await again.probeWholeState()).not.toBeNull();
    expect(await s.runs()).toBe(3);
  });

  it("follows this host's real `criu check` (which fails on kernel 6.18: no whole state, criu's error said)", async () => {
    const real = await criuUnusable();
    const rt = new ProcessRuntime(undefined, { sandbox: 'none', criu: 'criu' });
    const why = await rt.probeWholeState();
    if (real?.endsWith('not found')) expect(why).toBe('criu not found');
    else expect(why).toBe(real);
    expect(rt.wholeState === undefined).toBe(why !== null);
  });
});
