// `npm run bench -- latency [--json] [--runs N]`: submit → Running on an idle local instance. A whole
// Berth in this process (embedded PostgreSQL, server, dispatcher with the local driver and one warm
// instance); each run submits a `true` container over HTTP and waits for it to finish; the latency is
// the server-side started_at − queued_at, so the measurement itself adds no polling delay.
import { startWarmBerth } from './warm-berth.js';
import { benchArgs, opt } from './args.js';

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

export async function run(argv: string[]): Promise<number> {
  const { runs, json } = benchArgs('latency', argv, {
    json: opt.flag('print JSON'),
    runs: opt.int(100, 'submissions'),
  });
  const say = (s: string) => !json && console.error(s);
  say('starting Berth and waiting for the warm instance…');
  const berth = await startWarmBerth({
    prefix: 'berth-latency-',
    instance: { name: 'warm', vcpus: 2, ram: '2GiB' },
  });
  const { server } = berth;
  try {
    const headers = {
      authorization: `Bearer ${server.createdAdminToken!}`,
      'content-type': 'application/json',
    };
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
    await berth.stop();
  }
}
