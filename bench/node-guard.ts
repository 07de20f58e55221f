// `npm run bench -- node-guard [--nodes N] [--interval D] [--seconds S] [--batch B] [--json]`: what the node
// guard's share lock (LIVE_NODES in src/store/transitions/assign.ts: a start, assign or lock-assign locks the
// named nodes FOR SHARE) costs the nodes' pings, whose UPDATE of their node row waits for it. N nodes ping at
// their interval (spread evenly) while start report batches of B containers (each on a random node)
// commit back to back, for S seconds with the guard (START_SQL as the product runs it) and S seconds
// without (the same statement with FOR SHARE removed: a toggle in this bench only); the pings' latency
// p50/p99/max of each. After each batch its containers are put back to Locked (bench only) for the next.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { normalizeRequest } from '../src/model/request.js';
import { statesFrom } from '../src/model/transitions.js';
import { createPool } from '../src/store/db.js';
import { startEmbedded } from '../src/store/embedded.js';
import { migrate } from '../src/store/migrate.js';
import { Store } from '../src/store/store.js';
import { START_SQL } from '../src/store/transitions/start.js';
import { benchArgs, opt } from './args.js';

const OPTIONS = {
  nodes: opt.int(2000, 'nodes pinging'),
  interval: opt.durations('10s', 'each node pings once per interval (an idle agent: ping_wait, 10s)'),
  seconds: opt.int(10, 'seconds measured with the guard, then as many without'),
  batch: opt.int(100, 'containers per start report batch'),
  json: opt.flag('print JSON'),
};

const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!;

export async function run(argv: string[]): Promise<number> {
  const args = benchArgs('node-guard', argv, OPTIONS);
  const interval = args.interval[0]!;
  const say = (s: string) => !args.json && console.error(s);
  const home = mkdtempSync(join(tmpdir(), 'berth-node-guard-'));
  const pg = await startEmbedded({ dataDir: join(home, 'pgdata') });
  const pool = createPool(pg.url, 4);
  const pings = createPool(pg.url, 8);
  try {
    await migrate(pool);
    const store = new Store(pool);
    const pinger = new Store(pings);
    say(`creating ${args.nodes} nodes and ${args.nodes * 2} Locked containers…`);
    const nodes: string[] = [];
    for (let i = 0; i < args.nodes; i++)
      nodes.push(
        (
          await store.nodes.create({
            cluster: 'b',
            dispatcherTag: 'd',
            instanceId: `i-${i}`,
            instanceType: 't',
          })
        ).node.id,
      );
    const holder = 'b/d';
    const containers: { id: string; node: string; gen: number }[] = [];
    for (let n = 0; n < args.nodes * 2; n += 1000) {
      const reqs = await store.requests.create(
        'bench',
        Array.from({ length: Math.min(1000, args.nodes * 2 - n) }, () =>
          normalizeRequest({ command: ['true'], vcpus: 1, ram: '1GiB' }),
        ),
      );
      const locks = await store.containers.lock(
        reqs.map((r) => r.container_id!),
        holder,
      );
      const items = locks.map((l, i) => ({
        id: l.id,
        instance: `i-${(n + i) % args.nodes}`,
        node: nodes[(n + i) % args.nodes]!,
      }));
      await store.transitions.assign(items, holder);
      for (const it of items) containers.push({ id: it.id, node: it.node, gen: 0 });
    }
    const gens = await pool.query<{ id: string; lock_generation: number }>(
      `SELECT id, lock_generation FROM containers WHERE id = ANY($1)`,
      [containers.map((c) => c.id)],
    );
    const genOf = new Map(gens.rows.map((r) => [r.id, r.lock_generation]));
    for (const c of containers) c.gen = genOf.get(c.id)!;
    await pool.query('VACUUM ANALYZE');

    const measure = async (sql: string) => {
      const lat: number[] = [];
      let batches = 0;
      let stop = false;
      const end = performance.now() + args.seconds * 1000;
      const starter = (async () => {
        while (!stop) {
          const pick = Array.from(
            { length: args.batch },
            () => containers[Math.floor(Math.random() * containers.length)]!,
          );
          const uniq = [...new Map(pick.map((c) => [c.id, c])).values()];
          const r = await pool.query(sql, [
            new Date(),
            uniq.map((c) => c.id),
            uniq.map((c) => c.node),
            uniq.map((c) => c.gen),
            statesFrom('start'),
          ]);
          if (r.rowCount !== uniq.length) throw new Error(`started ${r.rowCount} of ${uniq.length}`);
          await pool.query(`UPDATE containers SET state = 'Locked', started_at = NULL WHERE id = ANY($1)`, [
            uniq.map((c) => c.id),
          ]);
          batches++;
        }
      })();
      const inFlight = new Set<Promise<void>>();
      const t0 = performance.now();
      let sent = 0;
      while (performance.now() < end) {
        // The pings due by now (node i pings at i/N of each interval), sent as they fall due.
        const due = Math.floor(((performance.now() - t0) / interval) * args.nodes);
        for (; sent < due; sent++) {
          const id = nodes[sent % args.nodes]!;
          const p = (async () => {
            const s = performance.now();
            await pinger.nodes.ping(id, 'busy');
            lat.push(performance.now() - s);
          })();
          inFlight.add(p);
          void p.finally(() => inFlight.delete(p));
        }
        await new Promise((r) => setTimeout(r, 5));
      }
      stop = true;
      await starter;
      await Promise.all(inFlight);
      return {
        pings: lat.length,
        p50_ms: Number(pct(lat, 0.5).toFixed(2)),
        p99_ms: Number(pct(lat, 0.99).toFixed(2)),
        max_ms: Number(Math.max(...lat).toFixed(2)),
        start_batches_per_s: Number((batches / args.seconds).toFixed(1)),
      };
    };
    const unguarded = START_SQL.replace(' FOR SHARE', '');
    if (unguarded === START_SQL) throw new Error('START_SQL has no FOR SHARE: the bench is out of date');
    say('warming…');
    await measure(START_SQL);
    const out: Record<string, unknown> = { nodes: args.nodes, interval_ms: interval, batch: args.batch };
    for (const [name, sql] of [
      ['guard', START_SQL],
      ['no guard', unguarded],
      ['guard again', START_SQL],
    ] as const) {
      say(`measuring ${name}…`);
      out[name] = await measure(sql);
    }
    if (args.json) console.log(JSON.stringify(out));
    else console.log(out);
    return 0;
  } finally {
    await pings.end();
    await pool.end();
    await pg.stop();
    rmSync(home, { recursive: true, force: true });
  }
}
