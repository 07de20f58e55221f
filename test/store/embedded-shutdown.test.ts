// The embedded PostgreSQL of `berth up` / `berth server` (started with the process's Shutdown): it runs in
// a process group of its own; a crash is still supervised (started again), but not once the owner has begun
// to stop; a forced stop kills it at once (its backends, each in a session of its own, follow).
import { chmodSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { processGroupMembers } from '../../src/agent/runtimes/procfs.js';
import { Shutdown } from '../../src/server/shutdown.js';
import { runningEmbeddedUrl, startEmbedded, type EmbeddedServer } from '../../src/store/embedded.js';
import { until } from '../helpers/cli.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function start() {
  const dir = mkdtempSync(join(tmpdir(), 'berth-pgstop-'));
  chmodSync(dir, 0o711);
  const progress: string[] = [];
  const shutdown = new Shutdown();
  const server: EmbeddedServer = await startEmbedded({
    dataDir: join(dir, 'pgdata'),
    onProgress: (l) => progress.push(l),
    shutdown,
  });
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  cleanups.push(() => server.stop());
  return { dir, dataDir: join(dir, 'pgdata'), progress, shutdown, server };
}

/** Process group of a pid, from /proc. */
async function pgrp(pid: number): Promise<number> {
  const { readFile } = await import('node:fs/promises');
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
}

/** Live processes whose working directory is `dir`. */
function processesIn(dir: string): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (!readlinkSync(`/proc/${name}/cwd`).startsWith(dir)) continue;
      if (/^\S+ \(.*\) Z/.test(readFileSync(`/proc/${name}/stat`, 'utf8'))) continue;
      out.push(Number(name));
    } catch {
      /* gone */
    }
  }
  return out;
}

async function query(url: string): Promise<number> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query('SELECT 1 AS one')).rows[0].one as number;
  } finally {
    await c.end();
  }
}

describe('embedded PostgreSQL owned by a stopping process', () => {
  it(
    'runs in a process group of its own, and a crash is still started again',
    { timeout: 120_000 },
    async () => {
      const { progress, server } = await start();
      const first = server.pid;
      expect(await pgrp(first)).toBe(first);
      expect(await pgrp(first)).not.toBe(await pgrp(process.pid));
      process.kill(first, 'SIGKILL');
      await until(() => progress.some((l) => /PostgreSQL is back/.test(l)), 90_000, 'the restart');
      expect(progress.join('\n')).toMatch(/exited unexpectedly \(SIGKILL\); starting it again/);
      expect(server.pid).not.toBe(first);
      expect(await pgrp(server.pid)).toBe(server.pid);
      expect(await query(server.url)).toBe(1);
    },
  );

  it('is not started again once the owner has begun to stop', { timeout: 120_000 }, async () => {
    const { progress, shutdown, server, dataDir } = await start();
    shutdown.begin();
    const pid = server.pid;
    process.kill(pid, 'SIGKILL');
    await until(
      () => progress.some((l) => /while stopping; not starting it again/.test(l)),
      30_000,
      'the exit',
    );
    // The supervisor decided in its exit handler: no server comes back on the data directory.
    await until(() => runningEmbeddedUrl(dataDir) === null, 30_000, 'the postmaster to be gone');
    expect(progress.join('\n')).not.toMatch(/unexpectedly/);
    expect(server.pid).toBe(pid);
  });

  it('a forced stop kills it at once; its backends follow', { timeout: 120_000 }, async () => {
    const { shutdown, server, dataDir } = await start();
    const c = new pg.Client({ connectionString: server.url });
    await c.connect();
    c.on('error', () => {});
    cleanups.push(() => c.end().catch(() => {}));
    // PostgreSQL puts each backend in a session of its own; they all work in the data directory.
    expect(processesIn(dataDir).length).toBeGreaterThan(1);
    shutdown.begin();
    shutdown.killOwned();
    await until(() => processesIn(dataDir).length === 0, 30_000, 'every PostgreSQL process to exit');
    expect(await processGroupMembers(server.pid)).toEqual([]);
    expect(runningEmbeddedUrl(dataDir)).toBeNull();
  });
});
