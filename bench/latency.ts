// `npm run bench -- latency [--json] [--runs N]`: submit → Running on an idle local instance. A whole
// Berth in this process (embedded PostgreSQL, server, dispatcher with the local driver and one warm
// instance); each run submits a `true` container over HTTP and waits for it to finish; the latency is
// the server-side started_at − queued_at, so the measurement itself adds no polling delay.
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LocalDriver } from '../src/cloud/local/driver.js';
import { loadConfig } from '../src/config/options.js';
import { parseDispatchConfig } from '../src/dispatch/config.js';
import { startDispatcher } from '../src/dispatch/run.js';
import { startServer } from '../src/server/server.js';

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

export async function run(argv: string[]): Promise<number> {
  let runs = 100;
  let json = false;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--json') json = true;
    else if (argv[i] === '--runs') runs = Number(argv[++i]);
    else throw new Error(`unknown option ${argv[i]} (expected --json, --runs N)`);
  }
  if (!Number.isInteger(runs) || runs < 1) throw new Error('--runs takes a whole number ≥ 1');
  const say = (s: string) => !json && console.error(s);
  const home = mkdtempSync(join(tmpdir(), 'berth-latency-'));
  chmodSync(home, 0o711);
  const cfg = loadConfig({ home, listen: '127.0.0.1:0', log_level: 'silent' }, {});
  const server = await startServer(cfg);
  const dcfg = parseDispatchConfig({
    instance_types: [{ name: 'warm', vcpus: 2, ram: '2GiB', price: 0.1 }],
    scheduler: { min_instances: 1, idle_timeout: '10m' },
    boot_delay: '0s',
  });
  const driver = new LocalDriver({
    home,
    bootDelayMs: 0,
    runtime: 'process',
    agentArgs: ['--ping-wait', '30s'],
  });
  const disp = await startDispatcher({
    cfg: dcfg,
    store: server.store,
    dbUrl: server.db.url,
    notifier: server.notifier,
    driver,
    apiUrl: server.url,
  });
  try {
    const token = server.createdAdminToken!;
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    say('waiting for the warm instance…');
    const deadline = Date.now() + 60_000;
    while (![...disp.dispatcher.instances.values()].some((i) => i.state === 'idle')) {
      if (Date.now() > deadline) throw new Error('the warm instance did not come up in 60 s');
      await new Promise((r) => setTimeout(r, 100));
    }
    const ids: string[] = [];
    say(`${runs} submissions, one at a time…`);
    for (let i = 0; i < runs; i++) {
      const r = await fetch(`${server.url}/v1/requests`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ command: ['true'], vcpus: 0.1, ram: '64MiB' }),
      });
      const req = (await r.json()) as { id: string; container_id: string };
      ids.push(req.container_id);
      for (;;) {
        const s = await server.store.ctx.pool.query(`SELECT state FROM containers WHERE id = $1`, [
          req.container_id,
        ]);
        if (s.rows[0].state === 'Complete' || s.rows[0].state === 'Cancelled') break;
        await new Promise((res) => setTimeout(res, 5));
      }
    }
    const rows = await server.store.ctx.pool.query(
      `SELECT extract(epoch FROM started_at - queued_at) * 1000 AS ms FROM containers WHERE id = ANY($1) AND started_at IS NOT NULL`,
      [ids],
    );
    const ms = rows.rows.map((r) => Number(r.ms)).sort((a, b) => a - b);
    const result = {
      runs: ms.length,
      p50_ms: +pct(ms, 50).toFixed(1),
      p99_ms: +pct(ms, 99).toFixed(1),
      max_ms: +(ms[ms.length - 1] ?? 0).toFixed(1),
      targets: { p50_ms: 50, p99_ms: 250 },
    };
    if (json) console.log(JSON.stringify(result, null, 2));
    else
      console.log(
        `submit → Running on an idle local instance (${result.runs} runs): p50 ${result.p50_ms} ms, p99 ${result.p99_ms} ms, max ${result.max_ms} ms (targets 50 / 250 ms)`,
      );
    return 0;
  } finally {
    await disp.stop();
    await disp.dispatcher.shutdownAll('benchmark done');
    await server.stop();
    rmSync(home, { recursive: true, force: true });
  }
}
