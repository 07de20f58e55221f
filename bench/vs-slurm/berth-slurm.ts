// The "Berth on SLURM" side of `bench vs-slurm`: the same private one-node SLURM cluster as the SLURM side,
// with Berth in front of it (embedded PostgreSQL, API server and the slurm backend's dispatcher in this
// process; each job runs its container through the one-shot agent). N jobs are submitted over HTTP;
// latencies come from the database (queued_at → started_at, as the Berth side measures them).
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SlurmCommands } from '../../src/backends/slurm/commands.js';
import { parseSlurmConfig } from '../../src/backends/slurm/config.js';
import { startSlurmDispatcher } from '../../src/backends/slurm/service.js';
import { defaultBerthBin } from '../../src/cloud/local/driver.js';
import { loadConfig } from '../../src/config/options.js';
import { startServer } from '../../src/server/server.js';
import { maxOverlap, pollUntil, runPool, type SideResult } from './common.js';
import { startSlurm } from './slurm.js';

export interface BerthSlurmOptions {
  jobs: number;
  concurrency: number;
  command: string[];
  ramMiB: number;
  cpus: number;
  realMemoryMiB: number;
  schedulerParameters: string | null;
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
    });
    const s = server;
    dispatcher = await startSlurmDispatcher({
      cfg,
      store: s.store,
      dbUrl: s.db.url,
      apiUrl: s.url,
      notifier: s.notifier,
      slurm: new SlurmCommands(cfg, cluster.env),
      log: (line) => o.say(`berth on slurm: ${line}`),
    });
    const headers = { authorization: `Bearer ${s.createdAdminToken!}`, 'content-type': 'application/json' };
    const spec = { command: o.command, vcpus: 1, ram: `${o.ramMiB}MiB` };
    o.say(`berth on slurm: ${o.jobs} jobs (one POST each, ${o.concurrency} at a time)…`);
    const pool = s.store.ctx.pool;
    const t0 = performance.now();
    await runPool(o.jobs, o.concurrency, async () => {
      const r = await fetch(`${s.url}/v1/requests`, { method: 'POST', headers, body: JSON.stringify(spec) });
      if (!r.ok) throw new Error(`POST /v1/requests: HTTP ${r.status} ${await r.text()}`);
      await r.arrayBuffer();
    });
    const submitted = performance.now();
    await pollUntil(
      async () =>
        (
          await pool.query(
            `SELECT count(*)::int AS n FROM containers WHERE state NOT IN ('Complete', 'Cancelled')`,
          )
        ).rows[0].n === 0,
      24 * 3600_000,
      100,
    );
    const done = performance.now();
    const rows = (
      await pool.query(
        `SELECT extract(epoch FROM started_at - queued_at) * 1000 AS ms,
                extract(epoch FROM started_at) * 1000 AS s, extract(epoch FROM finished_at) * 1000 AS f,
                state, exit_code
           FROM containers`,
      )
    ).rows as {
      ms: string | null;
      s: string | null;
      f: string | null;
      state: string;
      exit_code: number | null;
    }[];
    const ran = rows
      .filter((r) => r.s !== null && r.f !== null)
      .map((r): [number, number] => [Number(r.s), Number(r.f)]);
    return {
      jobs: o.jobs,
      recorded: rows.length,
      succeeded: rows.filter((r) => r.state === 'Complete' && r.exit_code === 0).length,
      submitSeconds: (submitted - t0) / 1000,
      makespanSeconds: (done - t0) / 1000,
      submitToStartMs: rows.filter((r) => r.ms !== null).map((r) => Number(r.ms)),
      runMs: ran.map(([a, b]) => b - a),
      maxRunning: maxOverlap(ran),
      schedulerConfig: cluster.schedulerConfig,
    };
  } finally {
    await stop();
  }
}
