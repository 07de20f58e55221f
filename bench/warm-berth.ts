// A whole Berth in the benchmark's process, as `berth up` sets it up (embedded PostgreSQL in a temp
// BERTH_HOME, API server, dispatcher, local driver), with one warm instance already idle: the latency and
// vs-slurm benchmarks measure work on a running system, not the first boot.
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LocalDriver } from '../src/cloud/local/driver.js';
import { loadConfig } from '../src/config/options.js';
import { parseDispatchConfig } from '../src/dispatch/config.js';
import { startDispatcher } from '../src/dispatch/run.js';
import { startServer } from '../src/server/server.js';
import { pollUntil } from './vs-slurm/common.js';

export interface WarmBerth {
  /** The temp BERTH_HOME (removed by stop()). */
  home: string;
  server: Awaited<ReturnType<typeof startServer>>;
  dispatcher: Awaited<ReturnType<typeof startDispatcher>>;
  /** Shuts the instances down, stops everything and removes the temp home. */
  stop(): Promise<void>;
}

export async function startWarmBerth(o: {
  /** mkdtemp prefix of the temp BERTH_HOME. */
  prefix: string;
  /** The one instance type. */
  instance: { name: string; vcpus: number; ram: string };
  /** Cap on instances (default: the dispatcher's). */
  maxInstances?: number;
  /** More `berth agent` flags for every instance's agent. */
  agentArgs?: string[];
}): Promise<WarmBerth> {
  const home = mkdtempSync(join(tmpdir(), o.prefix));
  chmodSync(home, 0o711); // as root, PostgreSQL runs as postgres and must reach home/pgdata
  let server: WarmBerth['server'] | null = null;
  let dispatcher: WarmBerth['dispatcher'] | null = null;
  const stop = async () => {
    await dispatcher?.stop();
    await dispatcher?.dispatcher.shutdownAll('benchmark done');
    await server?.stop();
    rmSync(home, { recursive: true, force: true });
  };
  try {
    server = await startServer(loadConfig({ home, listen: '127.0.0.1:0', log_level: 'silent' }, {}));
    const cfg = parseDispatchConfig({
      instance_types: [{ ...o.instance, price: 0.1 }],
      scheduler: {
        min_instances: 1,
        ...(o.maxInstances === undefined ? {} : { max_instances: o.maxInstances }),
        idle_timeout: '10m',
      },
      boot_delay: '0s',
    });
    const driver = new LocalDriver({
      home,
      bootDelayMs: 0,
      runtime: 'process',
      agentArgs: ['--ping-wait', '30s', ...(o.agentArgs ?? [])],
    });
    const s = server;
    dispatcher = await startDispatcher({
      cfg,
      store: s.store,
      dbUrl: s.db.url,
      notifier: s.notifier,
      driver,
      apiUrl: s.url,
    });
    const d = dispatcher;
    await pollUntil(
      async () => [...d.dispatcher.instances.values()].some((i) => i.state === 'idle'),
      60_000,
    ).catch(() => {
      throw new Error('the warm instance did not come up in 60 s');
    });
    return { home, server: s, dispatcher: d, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
