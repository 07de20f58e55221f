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
import type { SideResult } from './common.js';
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
      logger: createLogger({ name: 'berth on slurm', level: 'warn' }),
    });
    const r = await submitAndMeasure(s, {
      ...o,
      submit: 'single',
      say: (line) => o.say(`berth on slurm: ${line}`),
    });
    return { ...r, schedulerConfig: cluster.schedulerConfig };
  } finally {
    await stop();
  }
}
