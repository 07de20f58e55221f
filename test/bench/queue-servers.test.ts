// `npm run bench -- queue --servers N` (issue 12, what a second server adds): the submission clients are
// spread over N real `berth server`s on the first one's PostgreSQL, and every server takes calls; --profile,
// which samples one server's CPU, is refused with more than one. The compiled runner, as `npm run bench` runs it.
import { spawn, spawnSync } from 'node:child_process';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { assertBuilt } from '../helpers/cli.js';

const ROOT = resolve(import.meta.dirname, '..', '..');
const MAIN = join(ROOT, 'dist', 'bench', 'main.js');

describe('bench queue --servers', () => {
  it('spreads the batched submissions over two servers on one PostgreSQL; each takes calls', async () => {
    assertBuilt();
    const child = spawn(
      process.execPath,
      [MAIN, 'queue', '--servers', '2', '--only', 'batched', '--seconds', '1', '--json'],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const code = await new Promise<number | null>((r) => child.once('exit', r));
    expect(code, err).toBe(0);
    const r = JSON.parse(out) as {
      batched_submissions_per_s: number;
      servers: number;
      calls_by_server: number[];
    };
    expect(r.servers).toBe(2);
    expect(r.calls_by_server).toHaveLength(2);
    for (const n of r.calls_by_server) expect(n).toBeGreaterThan(0);
    expect(r.batched_submissions_per_s).toBeGreaterThan(0);
  }, 180_000);

  it('refuses --profile with more than one server, naming both options', () => {
    const r = spawnSync(process.execPath, [MAIN, 'queue', '--servers', '2', '--profile'], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(r.status).toBe(2);
    expect(r.stderr.trim()).toMatch(/^--profile samples one server's CPU: give it with --servers 1, not 2$/);
  });
});
