// `npm run bench -- dashboard [--queued N] [--runs N] [--json]`: how long the dashboard's pages take to
// render with a deep queue. An embedded PostgreSQL in a temp directory, filled with N Queued containers
// (default 100,000, every one with a status text, several owners and shapes), 200 live instances, a week of
// instance history and two days of chart samples; the API in-process; each page fetched `runs` times
// (default 30) with a signed-in session, as a browser would (full HTML), through fastify's inject.
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { buildApi } from '../src/api/server.js';
import { createPool, withDatabase } from '../src/store/db.js';
import { startEmbedded } from '../src/store/embedded.js';
import { migrate } from '../src/store/migrate.js';
import { Store } from '../src/store/store.js';
import { benchArgs, opt } from './args.js';

const OPTIONS = {
  queued: opt.int(100_000, 'Queued containers', 0),
  runs: opt.int(30, 'fetches of each page'),
  json: opt.flag('print JSON'),
};

const pct = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

/** Fills the database as a busy cluster would look: the queue, instances with history, chart samples. */
export async function fill(store: Store, queued: number): Promise<void> {
  const pool = store.ctx.pool;
  const now = store.ctx.clock.now();
  for (let done = 0; done < queued; done += 50_000) {
    const n = Math.min(50_000, queued - done);
    await pool.query(
      `WITH r AS (
         INSERT INTO container_requests (id, owner, name, command, vcpus, ram, priority, container_count_max, max_temp_retries,
           state, container_id, created_at, updated_at, labels)
         SELECT 'r-' || lpad(to_hex($1::bigint + g), 16, '0'), 'user' || (g % 20), 'job-' || g, '["true"]',
           (1 + g % 4) * 0.5, (1 + g % 8)::bigint * 536870912, 1 + (g % 1000), 3, 10, 'Committed',
           'c-' || lpad(to_hex($1::bigint + g), 16, '0'), $3::timestamptz - make_interval(secs => g), $3,
           jsonb_build_object('team', 'team' || (g % 5))
         FROM generate_series(1, $2::int) g RETURNING id, owner, container_id, priority, vcpus, ram, created_at)
       INSERT INTO containers (id, request_id, owner, attempt, state, priority, vcpus, ram, scratch, gpus, preemptible,
         queued_at, created_at, updated_at, scheduling_status)
       SELECT container_id, id, owner, 1, 'Queued', priority, vcpus, ram, 0, 0, false, created_at, created_at, $3,
         'queue position ' || row_number() OVER () || '; waits for a small instance; max_instances=200 reached; starts when an instance is freed or the limit is raised'
       FROM r`,
      [done, n, now],
    );
  }
  // 200 live instances, and a week of gone ones (one an hour per type) with containers that ran on them.
  await pool.query(
    `INSERT INTO instances (id, cluster, dispatcher_tag, type, provider_type, price, state, idle_behavior, created_at,
       state_since, updated_at, vcpus, ram, scratch, gpus, ready_at, ended_at, gone_at)
     SELECT 'i-live-' || g, 'c', 't', t.name, t.name, t.price, 'running', 'run', $1::timestamptz - interval '1 hour',
       $1, $1, t.vcpus, t.ram, 0, 0, $1::timestamptz - interval '59 minutes', NULL, NULL
     FROM generate_series(1, 200) g, LATERAL (SELECT (ARRAY['small','medium','large'])[1 + g % 3] AS name,
       (ARRAY[0.1, 0.4, 1.6])[1 + g % 3] AS price, (ARRAY[2, 8, 32])[1 + g % 3] AS vcpus,
       (ARRAY[4, 16, 64])[1 + g % 3]::bigint * 1073741824 AS ram) t
     UNION ALL
     SELECT 'i-old-' || g, 'c', 't', 'small', 'small', 0.1, 'gone', 'run', $1::timestamptz - make_interval(hours => g),
       $1, $1, 2, 4294967296, 0, 0, NULL, $1::timestamptz - make_interval(hours => g) + interval '50 minutes',
       $1::timestamptz - make_interval(hours => g) + interval '51 minutes'
     FROM generate_series(1, 168) g`,
    [now],
  );
  await pool.query(
    `INSERT INTO container_requests (id, owner, name, command, vcpus, ram, priority, container_count_max, max_temp_retries,
       state, container_id, created_at, updated_at, outcome)
     SELECT 'r-done-' || g, 'user' || (g % 20), 'done-' || g, '["true"]', 1, 1073741824, 500, 3, 10, 'Final',
       'c-done-' || g, $1::timestamptz - make_interval(hours => g / 20), $1::timestamptz - make_interval(hours => g / 20), 'success'
     FROM generate_series(1, 3340) g`,
    [now],
  );
  await pool.query(
    `INSERT INTO containers (id, request_id, owner, attempt, state, priority, vcpus, ram, scratch, gpus, preemptible,
       queued_at, created_at, updated_at, instance_id, started_at, finished_at, exit_code)
     SELECT 'c-done-' || g, 'r-done-' || g, 'user' || (g % 20), 1, 'Complete', 500, 1, 1073741824, 0, 0, false,
       $1::timestamptz - make_interval(hours => g / 20), $1, $1, 'i-old-' || (1 + g / 20),
       $1::timestamptz - make_interval(hours => 1 + g / 20) + interval '5 minutes',
       $1::timestamptz - make_interval(hours => 1 + g / 20) + interval '45 minutes', 0
     FROM generate_series(1, 3340) g`,
    [now],
  );
  await pool.query(
    `INSERT INTO dashboard_samples (at, queued, running, instances, spend_per_hour)
     SELECT $1::timestamptz - make_interval(secs => g * 15), $2, 400, '{"small": 67, "medium": 67, "large": 66}', 140
     FROM generate_series(1, 11520) g`,
    [now, queued],
  );
  await pool.query('ANALYZE');
}

export async function run(argv: string[]): Promise<number> {
  const args = benchArgs('dashboard', argv, OPTIONS);
  const say = (s: string) => !args.json && console.error(s);
  const dir = mkdtempSync(join(tmpdir(), 'berth-bench-dash-'));
  chmodSync(dir, 0o755); // as root, PostgreSQL runs as postgres and must reach it
  const pg = await startEmbedded({ dataDir: join(dir, 'pgdata') });
  try {
    const admin = createPool(pg.url, 1);
    await admin.query('CREATE DATABASE bench');
    await admin.end();
    const pool = createPool(withDatabase(pg.url, 'bench'), 10);
    await migrate(pool);
    const store = new Store(pool);
    const t0 = performance.now();
    say(
      `filling: ${args.queued} queued containers, 200 live instances, a week of history, two days of samples…`,
    );
    await fill(store, args.queued);
    say(`  filled in ${((performance.now() - t0) / 1000).toFixed(1)}s`);
    const app = await buildApi({ store });
    const cookieOf = async (scope: 'admin' | 'user', owner: string) => {
      const { secret } = await store.tokens.create({ scope, owner });
      const r = await app.inject({
        method: 'POST',
        url: '/dashboard/signin',
        payload: `token=${secret}`,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
      return String(r.headers['set-cookie']).split(';')[0]!;
    };
    const adminCookie = await cookieOf('admin', 'root');
    const userCookie = await cookieOf('user', 'user7');
    // A cursor deep in the queue: the page after the 50,000th container in the scheduler's order.
    const deep = await pool.query(
      `SELECT priority, queued_at, id FROM containers WHERE state = 'Queued'
       ORDER BY priority DESC, queued_at, id OFFSET $1 LIMIT 1`,
      [Math.floor(args.queued / 2)],
    );
    const d = deep.rows[0];
    const deepCursor = d
      ? Buffer.from(JSON.stringify([d.priority, d.queued_at.toISOString(), d.id])).toString('base64url')
      : '';
    const pages: [string, string, string][] = [
      ['overview (admin)', adminCookie, '/dashboard'],
      ['overview (user)', userCookie, '/dashboard'],
      ['waiting, first page (admin)', adminCookie, '/dashboard/queue'],
      ['waiting, page at the middle of the queue', adminCookie, `/dashboard/queue?after=${deepCursor}`],
      ['waiting, first page (user)', userCookie, '/dashboard/queue'],
      ['instances (200)', adminCookie, '/dashboard/instances'],
      ['requests, first page', adminCookie, '/dashboard/requests'],
      ['cost today by label', adminCookie, '/dashboard/cost?window=today&by=label:team'],
      ['cost 7 days by owner', adminCookie, '/dashboard/cost?window=7d'],
      ['charts data, 24 h', adminCookie, '/dashboard/charts.json?hours=24'],
    ];
    const results: Record<string, { p50_ms: number; p90_ms: number; max_ms: number; bytes: number }> = {};
    for (const [name, cookie, url] of pages) {
      const times: number[] = [];
      let bytes = 0;
      for (let i = 0; i < args.runs; i++) {
        const s = performance.now();
        const r = await app.inject({ method: 'GET', url, headers: { cookie } });
        if (r.statusCode !== 200) throw new Error(`${url}: HTTP ${r.statusCode}: ${r.body.slice(0, 300)}`);
        times.push(performance.now() - s);
        bytes = r.body.length;
      }
      times.sort((a, b) => a - b);
      results[name] = {
        p50_ms: +pct(times, 50).toFixed(1),
        p90_ms: +pct(times, 90).toFixed(1),
        max_ms: +times[times.length - 1]!.toFixed(1),
        bytes,
      };
      say(
        `  ${name.padEnd(42)} p50 ${results[name].p50_ms} ms  p90 ${results[name].p90_ms} ms  (${bytes} bytes)`,
      );
    }
    await app.close();
    await pool.end();
    if (args.json)
      console.log(JSON.stringify({ queued: args.queued, runs: args.runs, pages: results }, null, 2));
    return 0;
  } finally {
    await pg.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
