// The "Berth on SLURM" side of `bench vs-slurm`: the same private one-node SLURM cluster as the SLURM side,
// with Berth in front of it (embedded PostgreSQL, API server and the slurm backend's dispatcher in this
// process; each job runs its container through the one-shot agent). N jobs are submitted over HTTP;
// latencies come from the database (queued_at → started_at, as the Berth side measures them).
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SlurmCommands } from '../../src/backends/slurm/commands.js';
import { parseSlurmConfig } from '../../src/backends/slurm/config.js';
import { createLogger } from '../../src/log/logger.js';
import { startSlurmDispatcher } from '../../src/backends/slurm/service.js';
import { defaultBerthBin } from '../../src/cloud/local/driver.js';
import { loadConfig } from '../../src/config/options.js';
import { startServer } from '../../src/server/server.js';
import { submitAndMeasure } from './berth.js';
import { pct, type SideResult } from './common.js';
import type { Db } from '../../src/store/db.js';
import { startSlurm } from './slurm.js';

export interface BerthSlurmOptions {
  jobs: number;
  concurrency: number;
  command: string[];
  ramMiB: number;
  cpus: number;
  realMemoryMiB: number;
  schedulerParameters: string | null;
  /** reuse_allocation.enabled: a started job runs further containers that fit it. */
  reuse: boolean;
  say: (line: string) => void;
}

export async function runBerthOnSlurmJobs(
  o: BerthSlurmOptions,
): Promise<SideResult & { schedulerConfig: string[] }> {
  o.say('berth on slurm: starting SLURM, PostgreSQL, the API server and the slurm dispatcher…');
  const home = mkdtempSync(join(tmpdir(), 'berth-vs-slurm-on-'));
  chmodSync(home, 0o711); // as root, PostgreSQL runs as postgres and must reach home/pgdata
  const cluster = await startSlurm({
    cpus: o.cpus,
    realMemoryMiB: o.realMemoryMiB,
    schedulerParameters: o.schedulerParameters,
    say: o.say,
  });
  let server: Awaited<ReturnType<typeof startServer>> | null = null;
  let dispatcher: Awaited<ReturnType<typeof startSlurmDispatcher>> | null = null;
  const onSignal = () => void stop().finally(() => process.exit(130));
  const stop = async () => {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await dispatcher?.stop();
    await cluster.stop();
    await server?.stop();
    rmSync(home, { recursive: true, force: true });
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    server = await startServer(loadConfig({ home, listen: '127.0.0.1:0', log_level: 'silent' }, {}));
    const cfg = parseSlurmConfig({
      backend: 'slurm',
      cluster: 'bench',
      agent_command: [process.execPath, defaultBerthBin()],
      agent_runtime: 'process',
      work_dir: join(home, 'work'),
      // The one-shot agent answers at once when its container ends; no need for a shorter long poll.
      agent_ping_wait: '30s',
      reuse_allocation: { enabled: o.reuse },
    });
    const s = server;
    // squeue's share of a pass (it lists every job SLURM still keeps, finished ones included).
    const slurm = new SlurmCommands(cfg, cluster.env);
    const squeue = slurm.squeue.bind(slurm);
    const listed = { n: 0, ms: 0 };
    slurm.squeue = async () => {
      const t = performance.now();
      try {
        return await squeue();
      } finally {
        listed.n++;
        listed.ms += performance.now() - t;
      }
    };
    dispatcher = await startSlurmDispatcher({
      cfg,
      store: s.store,
      dbUrl: s.db.url,
      apiUrl: s.url,
      notifier: s.notifier,
      slurm,
      logger: createLogger({ name: 'berth on slurm', level: 'warn' }),
    });
    // The dispatcher's passes (how often the notifications wake it, and what they cost this machine).
    const d = dispatcher.dispatcher;
    const tick = d.tick.bind(d);
    const passes = { n: 0, ms: 0 };
    d.tick = async () => {
      const t = performance.now();
      try {
        await tick();
      } finally {
        passes.n++;
        passes.ms += performance.now() - t;
      }
    };
    const cpu0 = process.cpuUsage();
    const r = await submitAndMeasure(s, {
      ...o,
      submit: 'single',
      say: (line) => o.say(`berth on slurm: ${line}`),
    });
    const cpu = process.cpuUsage(cpu0);
    o.say(
      `berth on slurm: ${passes.n} dispatcher passes (${(passes.ms / Math.max(1, passes.n)).toFixed(0)} ms each on average, ` +
        `squeue ${(listed.ms / Math.max(1, listed.n)).toFixed(0)} ms of it); ` +
        `this process (API server, dispatcher) used ${((cpu.user + cpu.system) / 1e6).toFixed(1)} CPU-s`,
    );
    for (const line of await stages(s.store.ctx.pool)) o.say(`berth on slurm: ${line}`);
    return { ...r, schedulerConfig: cluster.schedulerConfig };
  } finally {
    await stop();
  }
}

/**
 * Where a job's time went, from the database: queued → its node record created (the dispatcher locked it and
 * is about to sbatch), → the agent registered (SLURM queued and started the job, the agent started up), →
 * started (first ping, start report), → finished (run, log, complete report). p50 / p99 in ms.
 */
async function stages(pool: Db): Promise<string[]> {
  const r = await pool.query(
    `SELECT extract(epoch FROM n.created_at - c.queued_at) * 1000 AS dispatch,
            extract(epoch FROM n.registered_at - n.created_at) * 1000 AS slurm_and_agent_start,
            extract(epoch FROM c.started_at - n.registered_at) * 1000 AS to_start,
            extract(epoch FROM c.finished_at - c.started_at) * 1000 AS run_and_report
       FROM containers c JOIN nodes n ON n.instance_id = c.instance_id
      WHERE c.state = 'Complete' AND n.registered_at IS NOT NULL`,
  );
  const cols = ['dispatch', 'slurm_and_agent_start', 'to_start', 'run_and_report'] as const;
  // With allocation reuse, a moved container's node is the job it was moved to: its stages from that node's
  // times say when that job started, not when the container waited; only `run_and_report` is its own.
  const reuse = await pool.query(
    `SELECT (SELECT count(*) FROM nodes WHERE registered_at IS NOT NULL) AS started,
            (SELECT count(*) FROM containers WHERE state = 'Complete') AS ran,
            (SELECT count(DISTINCT container_id) FROM container_events
              WHERE message LIKE '%moved to the allocation of SLURM job%') AS moved`,
  );
  const u = reuse.rows[0] as Record<string, string>;
  return [
    `${u.ran} containers ran in ${u.started} SLURM jobs that started (${u.moved} moved into another job's allocation)`,
    ...cols.map((k) => {
      const v = r.rows.map((row: Record<string, string>) => Number(row[k])).sort((a, b) => a - b);
      return `${k}: p50 ${pct(v, 50).toFixed(0)} ms, p99 ${pct(v, 99).toFixed(0)} ms (${v.length} jobs)`;
    }),
  ];
}
