// `npm run bench -- log-shipping [--json] [--lines N] [--flood MiB]`: how fast a chatty container's output
// reaches the store, and how soon its exit is reported. A whole Berth in this process (embedded
// PostgreSQL, server, dispatcher, one warm local instance running a real agent with the process runtime):
//   lines  `seq 1 N` (N lines, within the default 64MiB log limit's head): lines/s and MB/s into the store,
//          from the first chunk stored to the last;
//   flood  `yes | head -c SIZE` (far past the limit): what is stored, and the time from the container's
//          end to its exit being recorded (what the log limit caps).
import { startWarmBerth, type WarmBerth } from './warm-berth.js';
import { benchArgs, opt } from './args.js';

interface Shipped {
  container: string;
  state: string;
  exit_code: number | null;
  stored_bytes: number;
  stored_chunks: number;
  /** From the first chunk stored to the last (s). */
  shipping_s: number;
  /** From the container's end (start + its wall time) to its exit recorded (s). */
  exit_lag_s: number;
}

async function runOne(b: WarmBerth, command: string[]): Promise<Shipped> {
  const { server } = b;
  const r = await fetch(`${server.url}/v1/requests`, {
    method: 'POST',
    headers: { authorization: `Bearer ${server.createdAdminToken!}`, 'content-type': 'application/json' },
    body: JSON.stringify({ command, vcpus: 1, ram: '512MiB' }),
  });
  const req = (await r.json()) as { container_id: string };
  const id = req.container_id;
  const pool = server.store.ctx.pool;
  for (;;) {
    const s = await pool.query(`SELECT state FROM containers WHERE id = $1`, [id]);
    if (s.rows[0].state === 'Complete' || s.rows[0].state === 'Cancelled') break;
    await new Promise((res) => setTimeout(res, 50));
  }
  const c = (
    await pool.query(
      `SELECT state, exit_code, started_at, finished_at, usage FROM containers WHERE id = $1`,
      [id],
    )
  ).rows[0];
  const logs = (
    await pool.query(
      `SELECT count(*)::int AS n, coalesce(sum(octet_length(data)), 0)::bigint AS bytes,
         extract(epoch FROM max(at) - min(at)) AS span FROM log_chunks WHERE container_id = $1 AND stream <> 'system'`,
      [id],
    )
  ).rows[0];
  const ended = new Date(c.started_at).getTime() + Number(c.usage?.wall_ms ?? 0);
  return {
    container: id,
    state: c.state,
    exit_code: c.exit_code,
    stored_bytes: Number(logs.bytes),
    stored_chunks: logs.n,
    shipping_s: Number(logs.span ?? 0),
    exit_lag_s: (new Date(c.finished_at).getTime() - ended) / 1000,
  };
}

export async function run(argv: string[]): Promise<number> {
  const {
    json,
    lines,
    flood: floodMiB,
  } = benchArgs('log-shipping', argv, {
    json: opt.flag('print JSON'),
    lines: opt.int(2_500_000, 'lines the chatty container prints'),
    flood: opt.int(256, 'MiB the flooding container writes'),
  });
  const say = (s: string) => !json && console.error(s);
  say('starting Berth and waiting for the warm instance…');
  const berth = await startWarmBerth({
    prefix: 'berth-logship-',
    instance: { name: 'warm', vcpus: 2, ram: '2GiB' },
  });
  try {
    say(`lines: seq 1 ${lines}…`);
    const l = await runOne(berth, ['seq', '1', String(lines)]);
    say(`flood: yes | head -c ${floodMiB}MiB…`);
    const f = await runOne(berth, ['sh', '-c', `yes berth | head -c ${floodMiB * 1024 * 1024}`]);
    const mb = (bytes: number) => bytes / 1e6;
    const result = {
      measured_under: 'shared load (other work on this machine): indicative only',
      lines: {
        ...l,
        lines,
        lines_per_s: Math.round(lines / Math.max(l.shipping_s, 0.001)),
        mb_per_s: +(mb(l.stored_bytes) / Math.max(l.shipping_s, 0.001)).toFixed(1),
      },
      flood: { ...f, printed_bytes: floodMiB * 1024 * 1024 },
    };
    if (json) console.log(JSON.stringify(result, null, 2));
    else {
      console.log(
        `lines: ${lines} lines (${mb(l.stored_bytes).toFixed(1)} MB) stored in ${l.shipping_s.toFixed(2)} s: ` +
          `${result.lines.lines_per_s} lines/s, ${result.lines.mb_per_s} MB/s; exit recorded ${l.exit_lag_s.toFixed(2)} s after the container ended`,
      );
      console.log(
        `flood: ${floodMiB}MiB printed, ${mb(f.stored_bytes).toFixed(1)} MB stored (log limit 64MiB); ` +
          `exit recorded ${f.exit_lag_s.toFixed(2)} s after the container ended`,
      );
      console.log('(measured under shared load)');
    }
    return 0;
  } finally {
    await berth.stop();
  }
}
