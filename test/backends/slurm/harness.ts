// A real SLURM (bench/slurm-cluster.ts: munged, slurmctld, two slurmd of different sizes, in a temp dir on
// free ports) in front of a real Berth (API server on this file's database), and the slurm dispatcher,
// in-process or as a `berth dispatch --backend slurm` process. Everything is stopped after, even on failure.
import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll } from 'vitest';
import { containerCgroup, killCgroup, probeCgroups } from '../../../src/agent/runtimes/cgroup.js';
import {
  slurmUnavailable,
  startSlurm,
  type SlurmCluster,
  type SlurmNodeSpec,
} from '../../../bench/slurm-cluster.js';
import { SlurmCommands } from '../../../src/backends/slurm/commands.js';
import { parseSlurmConfig, type SlurmConfig } from '../../../src/backends/slurm/config.js';
import { startSlurmDispatcher, type RunningSlurmDispatcher } from '../../../src/backends/slurm/service.js';
import type { SlurmEvent } from '../../../src/backends/slurm/dispatcher.js';
import { parseSqueue, squeueArgs, type SlurmJob } from '../../../src/backends/slurm/squeue.js';
import { loadConfig } from '../../../src/config/options.js';
import { createLogger } from '../../../src/log/logger.js';
import { startServer, type RunningServer } from '../../../src/server/server.js';
import {
  assertBuilt,
  berthDaemon,
  BIN,
  killProcessesMentioning,
  until,
  type CliResult,
} from '../../helpers/cli.js';
import { testDb, type TestDb } from '../../helpers/db.js';

const exec = promisify(execFile);
/** BERTH_SLURM_DEBUG=1: the dispatchers' events on stderr, and the cluster's dir kept. */
const debug = process.env.BERTH_SLURM_DEBUG === '1';

/** Why these tests cannot run here (SLURM missing, not root, dist not built), or null. */
export function slurmTestsUnavailable(): string | null {
  const why = slurmUnavailable();
  if (why) return why;
  try {
    assertBuilt();
  } catch (err) {
    return (err as Error).message;
  }
  return null;
}

/** Two nodes of different sizes: 1 CPU / 1 GiB, and 2 CPUs / 3 GiB with the feature "big". */
export const TWO_NODES: SlurmNodeSpec[] = [
  { name: 'small', cpus: 1, realMemoryMiB: 1024 },
  { name: 'big', cpus: 2, realMemoryMiB: 3072, features: ['big'], tmpDiskMiB: 10_240 },
];

export interface SlurmWorld {
  cluster: SlurmCluster;
  server: RunningServer;
  dir: string;
  token: string;
  /** The slurm config object (file keys) every dispatcher of this world starts from. */
  baseConfig: Record<string, unknown>;
  api<T = unknown>(method: string, path: string, body?: unknown): Promise<T>;
  /** The real CLI against this world's server (asynchronous: the server runs in this process). */
  cli(args: string[]): Promise<CliResult>;
  /** Every job of the cluster, any state squeue still lists. */
  jobs(): Promise<SlurmJob[]>;
  /** An in-process dispatcher (stopped by stop() if the test does not). */
  dispatcher(
    overrides?: Record<string, unknown>,
    onEvent?: (e: SlurmEvent) => void,
  ): Promise<RunningSlurmDispatcher>;
  /** `berth dispatch --backend slurm` as a process. */
  dispatcherProcess(overrides?: Record<string, unknown>): ReturnType<typeof berthDaemon>;
  /** Waits until a container (by id) satisfies `ok`. */
  container(
    id: string,
    ok: (c: ContainerView) => boolean,
    timeoutMs: number,
    what: string,
  ): Promise<ContainerView>;
  stop(): Promise<void>;
}

export interface ContainerView {
  id: string;
  request_id: string;
  state: string;
  priority: number;
  instance_id: string | null;
  node_id: string | null;
  started_at: string | null;
  finished_at: string | null;
  exit_code: number | null;
  oom_killed: boolean | null;
  failure_class: string | null;
  runtime_status: string | null;
  scheduling_status: string | null;
  usage: { cpu_seconds: number; peak_ram: number; wall_ms: number } | null;
  lock_count: number;
}

export async function slurmWorld(
  o: { nodes?: SlurmNodeSpec[]; slurmdTimeoutS?: number; minJobAgeS?: number } = {},
): Promise<SlurmWorld> {
  const db = await testDb();
  const dir = mkdtempSync(join(tmpdir(), 'berth-slurm-world-'));
  chmodSync(dir, 0o711);
  mkdirSync(join(dir, 'out'));
  const running: RunningSlurmDispatcher[] = [];
  const daemons: ReturnType<typeof berthDaemon>[] = [];
  let cluster: SlurmCluster | null = null;
  let server: RunningServer | null = null;
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    for (const d of running) await d.stop().catch(() => {});
    for (const d of daemons) await d.stop('SIGKILL').catch(() => {});
    await cluster?.stop();
    await removeLeftoverCgroups(db);
    await server?.stop();
    // Agents are children of the cluster's slurmd (gone with their namespaces); anything else left mentioning
    // this world's dir (a dispatcher process) goes too.
    killProcessesMentioning(dir);
    rmSync(dir, { recursive: true, force: true });
  };
  afterAll(stop, 60_000);
  try {
    cluster = await startSlurm({
      prefix: 'berth-slurm-test-',
      nodes: o.nodes ?? TWO_NODES,
      schedulerParameters: 'batch_sched_delay=0',
      slurmdTimeoutS: o.slurmdTimeoutS ?? 5,
      minJobAgeS: o.minJobAgeS,
    });
    server = await startServer(
      loadConfig({ home: dir, database_url: db.url, listen: '127.0.0.1:0', log_level: 'silent' }, {}),
    );
  } catch (err) {
    await stop();
    throw err;
  }
  const c = cluster;
  const s = server;
  const token = s.createdAdminToken!;
  const baseConfig: Record<string, unknown> = {
    backend: 'slurm',
    cluster: 'test',
    agent_command: [process.execPath, BIN],
    agent_runtime: 'process',
    agent_kill_grace: '3s',
    work_dir: join(dir, 'work'),
    job_output: join(dir, 'out', '%j.out'),
    tick_interval: '500ms',
    node_lost_after: '15s',
    submit_grace: '20s',
    orphan_grace: '10s',
    features: { big: 'big' },
    time_margin: '1m',
  };
  const api = async <T>(method: string, path: string, body?: unknown): Promise<T> => {
    const r = await fetch(`${s.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await r.text();
    if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${text}`);
    return JSON.parse(text) as T;
  };
  return {
    cluster: c,
    server: s,
    dir,
    token,
    baseConfig,
    api,
    cli: (args) =>
      new Promise<CliResult>((resolve) => {
        execFile(
          process.execPath,
          [BIN, ...args],
          {
            env: {
              ...process.env,
              BERTH_HOME: dir,
              BERTH_API_URL: s.url,
              BERTH_TOKEN: token,
              BERTH_DATABASE_URL: '',
              BERTH_LOG_LEVEL: 'silent',
            },
            timeout: 60_000,
          },
          (err, stdout, stderr) =>
            resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
        );
      }),
    async jobs() {
      const r = await exec(
        'squeue',
        squeueArgs('all').filter((a) => a !== '--me'),
        { env: c.env },
      );
      return parseSqueue(r.stdout).jobs;
    },
    async dispatcher(overrides = {}, onEvent) {
      const cfg: SlurmConfig = parseSlurmConfig({ ...baseConfig, ...overrides });
      const d = await startSlurmDispatcher({
        cfg,
        store: s.store,
        dbUrl: s.db.url,
        apiUrl: s.url,
        notifier: s.notifier,
        slurm: new SlurmCommands(cfg, c.env),
        logger: debug ? createLogger({ name: 'slurm dispatcher', level: 'debug', pretty: true }) : undefined,
        onEvent,
      });
      running.push(d);
      return d;
    },
    dispatcherProcess(overrides = {}) {
      const file = join(dir, `dispatch-${running.length + daemons.length}.json`);
      writeFileSync(file, JSON.stringify({ ...baseConfig, ...overrides }));
      const d = berthDaemon(
        ['dispatch', '--backend', 'slurm', '--config', file, '--database-url', db.url, '--api-url', s.url],
        // debug: every action on stderr, in d.output() for a failing test to show
        { ...c.env, BERTH_HOME: dir, BERTH_LOG_LEVEL: 'debug' },
      );
      daemons.push(d);
      return d;
    },
    async container(id, ok, timeoutMs, what) {
      return until(
        async () => {
          const v = await api<ContainerView>('GET', `/v1/containers/${id}`);
          return ok(v) ? v : null;
        },
        timeoutMs,
        `${id}: ${what}`,
      );
    },
    stop,
  };
}

/** Submits a request through the API; returns its first container's id. */
export async function submit(
  w: SlurmWorld,
  spec: Record<string, unknown>,
): Promise<{ request: string; container: string }> {
  const r = await w.api<{ id: string; container_id: string }>('POST', '/v1/requests', {
    vcpus: 1,
    ram: '64MiB',
    ...spec,
  });
  return { request: r.id, container: r.container_id };
}

/**
 * Removes the cgroups of this world's containers that are still there once its cluster stopped, saying so:
 * this host, unlike a node that goes away, would keep them. Nothing should be left (cleanup.test.ts checks
 * each way a job ends; the leak it found: a shim killed by SLURM's SIGTERM before the agent held it, whose
 * exit the agent then waited for forever). The warning names the container, to trace which path left it.
 */
async function removeLeftoverCgroups(db: TestDb): Promise<void> {
  const host = await probeCgroups();
  if (host.unusable !== null) return;
  const ids = (await db.pool.query<{ id: string }>('SELECT id FROM containers')).rows.map((r) => r.id);
  for (const id of ids) {
    const group = containerCgroup(host, id);
    if ((await leftoverCgroupDirs(id)).length === 0) continue;
    console.warn(`slurm test world: the cgroup of container ${id} was left behind; removing it`);
    await killCgroup(group).catch((err: Error) => console.warn(`  cannot remove it: ${err.message}`));
  }
}

/** The directories of container `id`'s cgroup (berth/<id>, one per hierarchy on v1) that exist now. */
export async function leftoverCgroupDirs(id: string): Promise<string[]> {
  const host = await probeCgroups();
  if (host.unusable !== null) return [];
  return (await containerCgroup(host, id).dirs()).filter((d) => existsSync(d));
}
