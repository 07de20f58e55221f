// The node's memory of a passed sandbox probe (probe-cache.ts), against the real bwrap behind a wrapper
// that counts its runs: a good record skips the probe, a stale key or a corrupt file probes again, a
// failed probe is not recorded.
import { chmod, mkdtemp, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect } from 'vitest';
import { findExecutable, probeSandbox, probeSandboxNow } from '../../src/agent/runtimes/sandbox.js';
import { itIf } from '../helpers/needs.js';

const realBwrap = await findExecutable('bwrap');
const probed = await probeSandbox();
const missing = typeof probed === 'string' ? probed : null;

const temp: string[] = [];
afterEach(async () => {
  await Promise.all(temp.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

/** A dir with a bwrap wrapper that appends a line to `runs` each time it runs, and a cache file path. */
async function setup(): Promise<{ bwrap: string; cache: string; runs: () => Promise<number> }> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-probe-cache-'));
  temp.push(dir);
  const bwrap = join(dir, 'bwrap');
  const count = join(dir, 'runs');
  await writeFile(bwrap, `#!/bin/sh\necho run >> '${count}'\nexec '${realBwrap}' "$@"\n`);
  await chmod(bwrap, 0o755);
  const runs = () =>
    readFile(count, 'utf8').then(
      (t) => t.split('\n').filter(Boolean).length,
      () => 0,
    );
  return { bwrap, cache: join(dir, 'sandbox-probe.json'), runs };
}

describe('sandbox probe cache', () => {
  itIf(missing)('a passed probe is recorded and the next agent skips it', async () => {
    const { bwrap, cache, runs } = await setup();
    expect(await probeSandboxNow(bwrap, cache)).toMatchObject({ bwrap });
    expect(await runs()).toBe(1);
    expect(await probeSandboxNow(bwrap, cache)).toMatchObject({ bwrap });
    expect(await probeSandboxNow(bwrap, cache)).toMatchObject({ bwrap });
    expect(await runs()).toBe(1);
    // Without a cache file: probed every time.
    await probeSandboxNow(bwrap, null);
    expect(await runs()).toBe(2);
  });

  itIf(missing)(
    'a stale key (bwrap replaced: another mtime) probes again and records the new key',
    async () => {
      const { bwrap, cache, runs } = await setup();
      await probeSandboxNow(bwrap, cache);
      const before = await readFile(cache, 'utf8');
      await utimes(bwrap, new Date(2001, 0, 1), new Date(2001, 0, 1));
      await probeSandboxNow(bwrap, cache);
      expect(await runs()).toBe(2);
      expect(await readFile(cache, 'utf8')).not.toBe(before);
      await probeSandboxNow(bwrap, cache);
      expect(await runs()).toBe(2);
    },
  );

  itIf(missing)('a corrupt or foreign file is not trusted: probed again, then rewritten', async () => {
    const { bwrap, cache, runs } = await setup();
    for (const junk of ['{"passed": tru', '', '[]', '{"passed": true}', 'null']) {
      await writeFile(cache, junk);
      const n = await runs();
      await probeSandboxNow(bwrap, cache);
      expect(await runs(), `file ${JSON.stringify(junk)}`).toBe(n + 1);
    }
    await probeSandboxNow(bwrap, cache);
    expect(await runs()).toBe(5);
  });

  itIf(missing)('a failed probe is not recorded: the next one probes again and reports why', async () => {
    const { bwrap, cache, runs } = await setup();
    await writeFile(
      bwrap,
      `#!/bin/sh\necho run >> '${join(cache, '..', 'runs')}'\necho 'no namespaces' >&2\nexit 1\n`,
    );
    for (let i = 1; i <= 2; i++) {
      expect(await probeSandboxNow(bwrap, cache)).toMatch(/cannot create a sandbox here: no namespaces/);
      expect(await runs()).toBe(i);
    }
    await expect(readFile(cache, 'utf8')).rejects.toThrow(/ENOENT/);
  });

  itIf(missing)('an unwritable cache location changes nothing but the saving', async () => {
    const { bwrap, runs } = await setup();
    const cache = join(bwrap, 'not-a-dir', 'sandbox-probe.json');
    expect(await probeSandboxNow(bwrap, cache)).toMatchObject({ bwrap });
    expect(await probeSandboxNow(bwrap, cache)).toMatchObject({ bwrap });
    expect(await runs()).toBe(2);
  });
});
