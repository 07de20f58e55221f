// `npm run bench -- queue [--json] [--seconds N] [--rows N] [--profile] [--only single|batched] [--servers N]`
// (`--help`): the queue service's throughput and latency (`--only single` or `--only batched`: that phase
// alone, to compare one change's cost).
// A real `berth server` (its own embedded PostgreSQL in a temp BERTH_HOME) in a child process, loaded by
// clients in this process over HTTP; store lifecycles run in-process against the same database.
// `--servers N`: N-1 more `berth server`s on that one PostgreSQL (BERTH_DATABASE_URL, each in its own
// BERTH_HOME, as docs/OPERATIONS.md runs them), the submission clients spread over all N: what a second
// server adds (issue 12).
import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { normalizeRequest } from '../src/model/request.js';
import { createPool } from '../src/store/db.js';
import { reachableDataDir } from '../src/store/embedded.js';
import { Reports } from '../src/store/reports.js';
import { Store } from '../src/store/store.js';
import { benchArgs, opt, UsageError } from './args.js';
import {
  cpuSample,
  monotonicUs,
  postmasterPid,
  printCpuProfile,
  printIndexUse,
  printProfile,
  topStatements,
  type Window,
} from './store-profile.js';

const ROOT = resolve(import.meta.dirname, '..', '..');

const OPTIONS = {
  json: opt.flag('print JSON'),
  seconds: opt.number(5, 'seconds each throughput phase runs'),
  rows: opt.int(1_000_000, 'containers to fill the tables with for the listing latencies', 0),
  profile: opt.flag("restart the server's PostgreSQL with pg_stat_statements and print each phase's profile"),
  only: opt.oneOf(
    ['all', 'single', 'batched'] as const,
    'all',
    'run only this phase (single: the single submissions; batched: the batched ones)',
  ),
  servers: opt.int(1, 'API servers on the one PostgreSQL; the submission clients are spread over them'),
};

function pct(sorted: number[], p: number): number {
  return sorted.length === 0
    ? 0
    : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function until<T>(fn: () => T | null, ms: number): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Runs `workers` loops of `op` for `seconds`; returns operations per second. */
/** Runs `op` in `workers` loops for `seconds`; each loop passes its own index (0 … workers-1). */
async function load(
  workers: number,
  seconds: number,
  op: (worker: number) => Promise<number>,
): Promise<number> {
  const end = performance.now() + seconds * 1000;
  let done = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: workers }, async (_, worker) => {
      while (performance.now() < end) {
        // Not `done += await op()`: that reads `done` before the await and loses the other workers' counts.
        const n = await op(worker);
        done += n;
      }
    }),
  );
  return done / ((performance.now() - t0) / 1000);
}

export async function run(argv: string[]): Promise<number> {
  const args = benchArgs('queue', argv, OPTIONS);
  if (args.profile && args.servers > 1)
    throw new UsageError(`--profile samples one server's CPU: give it with --servers 1, not ${args.servers}`);
  const say = (s: string) => !args.json && console.error(s);
  const home = mkdtempSync(join(tmpdir(), 'berth-bench-'));
  chmodSync(home, 0o711); // as root, PostgreSQL runs as postgres and must reach home/pgdata
  // `dir`: the server's BERTH_HOME; `databaseUrl`: '' for the embedded PostgreSQL in `dir`.
  const startServer = async (dir = home, databaseUrl = '') => {
    rmSync(join(dir, 'api-url'), { force: true });
    // --profile: the server's CPU profile (written when it exits) is summarised at the end.
    const cpuProf = args.profile ? ['--cpu-prof', `--cpu-prof-dir=${join(home, 'cpuprof')}`] : [];
    const proc = spawn(
      process.execPath,
      [...cpuProf, join(ROOT, 'bin', 'berth.js'), 'server', '--listen', '127.0.0.1:0'],
      {
        env: { ...process.env, BERTH_HOME: dir, BERTH_DATABASE_URL: databaseUrl },
        stdio: ['ignore', 'ignore', 'inherit'],
      },
    );
    const exited = new Promise((r) => proc.once('exit', r));
    const url = (
      await until(
        () => (existsSync(join(dir, 'api-url')) ? readFileSync(join(dir, 'api-url'), 'utf8').trim() : null),
        60_000,
      )
    ).replace(/\/$/, '');
    return { proc, url, exited };
  };
  let server = await startServer().catch((err: unknown) => {
    rmSync(home, { recursive: true, force: true });
    throw err;
  });
  const dataDir = reachableDataDir(join(home, 'pgdata'));
  const windows: Window[] = [];
  const others: { proc: ChildProcess; exited: Promise<unknown>; url: string; home: string }[] = [];
  try {
    if (args.profile) {
      // pg_stat_statements must be loaded when PostgreSQL starts: stop, preload it, start again.
      server.proc.kill('SIGINT');
      await server.exited;
      appendFileSync(
        join(dataDir, 'postgresql.conf'),
        `\nshared_preload_libraries = 'pg_stat_statements'\npg_stat_statements.track = 'all'\n`,
      );
      server = await startServer();
    }
    const { url } = server;
    const token = readFileSync(join(home, 'admin-token'), 'utf8').trim();
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const pgPort = readFileSync(`${dataDir}.port`, 'utf8').trim();
    const pgPass = readFileSync(`${dataDir}.password`, 'utf8').trim();
    const dbUrl = `postgres://postgres:${encodeURIComponent(pgPass)}@127.0.0.1:${pgPort}/berth`;
    for (let i = 1; i < args.servers; i++) {
      const dir = mkdtempSync(join(tmpdir(), 'berth-bench-'));
      const other = await startServer(dir, dbUrl).catch((err: unknown) => {
        rmSync(dir, { recursive: true, force: true });
        throw err;
      });
      others.push({ ...other, home: dir });
    }
    // The submission clients, worker i through server i mod N; what each server took is counted.
    const targets = [url, ...others.map((o) => o.url)].map((u) => new URL(u));
    const perServer = targets.map(() => 0);
    // The load generator shares the two cores with the server and PostgreSQL: node:http with keep-alive
    // costs ~0.15 ms of CPU per request here, fetch ~0.45 ms (which the server's numbers then pay for).
    const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
    const post = (path: string, body: unknown, worker = 0) =>
      new Promise<void>((resolve, reject) => {
        const data = JSON.stringify(body);
        const t = worker % targets.length;
        const target = targets[t]!;
        const req = http.request(
          {
            host: target.hostname,
            port: target.port,
            path,
            method: 'POST',
            agent,
            headers: { ...headers, 'content-length': Buffer.byteLength(data) },
          },
          (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (c: Buffer) => chunks.push(c));
            res.on('end', () => {
              if (res.statusCode! >= 300)
                return reject(
                  new Error(`${path}: HTTP ${res.statusCode} ${Buffer.concat(chunks).toString()}`),
                );
              perServer[t]!++;
              resolve();
            });
            res.on('error', reject);
          },
        );
        req.on('error', reject);
        req.end(data);
      });
    const spec = { command: ['echo', 'hi'], vcpus: 1, ram: '1GiB' };
    const over = args.servers > 1 ? ` over ${args.servers} servers` : '';
    const pool = createPool(dbUrl, 20);
    // --profile: each phase's CPU per process and PostgreSQL's top statements (bench/store-profile.ts).
    if (args.profile) await pool.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    const profiled = async (phase: string, measure: () => Promise<number>): Promise<number> => {
      if (!args.profile) return measure();
      const pm = postmasterPid(dataDir);
      const from = monotonicUs();
      await topStatements(pool, 0);
      const before = cpuSample(server.proc.pid!, pm);
      const t0 = performance.now();
      const rate = await measure();
      const after = cpuSample(server.proc.pid!, pm);
      windows.push({ phase, from, to: monotonicUs() });
      const ops = (rate * (performance.now() - t0)) / 1000;
      printProfile(say, phase, ops, before, after, await topStatements(pool));
      return rate;
    };

    const batch = Array.from({ length: 1000 }, () => spec);
    const batchedPhase = async () => {
      say(`batched submissions (1,000 per call), 4 clients${over}, ${args.seconds}s…`);
      const rate = await profiled('batched', () =>
        load(4, args.seconds, async (w) => (await post('/v1/requests/batch', { requests: batch }, w), 1000)),
      );
      say(`  ${rate.toFixed(0)}/s`);
      return rate;
    };
    if (args.only === 'batched') {
      const rate = await batchedPhase();
      await pool.end();
      agent.destroy();
      if (args.json)
        console.log(
          JSON.stringify({
            batched_submissions_per_s: Math.round(rate),
            servers: args.servers,
            calls_by_server: perServer,
          }),
        );
      else console.log(`batched submissions/s (1,000/call):  ${Math.round(rate)}${over} (target ≥ 50,000)`);
      return 0;
    }
    say(`single submissions, 16 clients${over}, ${args.seconds}s…`);
    const single = await profiled('single', () =>
      load(16, args.seconds, async (w) => (await post('/v1/requests', spec, w), 1)),
    );
    say(`  ${single.toFixed(0)}/s`);
    if (args.only === 'single') {
      await pool.end();
      agent.destroy();
      if (args.json)
        console.log(
          JSON.stringify({
            single_submissions_per_s: Math.round(single),
            servers: args.servers,
            calls_by_server: perServer,
          }),
        );
      else console.log(`single submissions/s (16 clients):   ${Math.round(single)}${over} (target ≥ 3,000)`);
      return 0;
    }
    const batched = await batchedPhase();

    // Lifecycles through the store: submit, lock, assign, start, complete.
    const store = new Store(pool);
    const { node, bootstrapSecret } = await store.nodes.create({
      cluster: 'b',
      dispatcherTag: 'b',
      instanceId: 'i-bench',
      instanceType: 't',
    });
    await store.nodes.register(node.id, bootstrapSecret, {});
    const normalized = normalizeRequest(spec);
    // Lifecycles through the store: submit, lock, assign (the dispatcher's calls), then the agent's start
    // and exit reports through `reports` — the group commit the API sends them through (store.reports),
    // or one without grouping (one report per commit), to show what the grouping is worth.
    // `pass`: the dispatcher's shape instead: a pass loop locks and places every container waiting for it
    // in one statement (lockAssign, as the act step does for a ready instance), while the lifecycles wait.
    let waiting: { id: string; done: (token: string) => void; fail: (err: unknown) => void }[] = [];
    let passing = false;
    const passes = async () => {
      passing = true;
      while (waiting.length > 0) {
        const batch = waiting;
        waiting = [];
        try {
          const granted = new Map(
            (
              await store.transitions.lockAssign(
                batch.map((w) => ({ id: w.id, instance: 'i-bench', node: node.id })),
                'bench/d',
              )
            ).map((g) => [g.id, g.token]),
          );
          for (const w of batch) {
            const token = granted.get(w.id);
            if (token === undefined) w.fail(new Error(`lock of ${w.id} refused`));
            else w.done(token);
          }
        } catch (err) {
          for (const w of batch) w.fail(err);
        }
      }
      passing = false;
    };
    const byPass = (id: string) =>
      new Promise<string>((done, fail) => {
        waiting.push({ id, done, fail });
        if (!passing) void passes();
      });
    const lifecycle =
      (reports: Reports, pass = false) =>
      async () => {
        const [r] = await store.requests.create('bench', [normalized]);
        const id = r!.container_id!;
        let token: string;
        if (pass) token = await byPass(id);
        else {
          const [l] = await store.containers.lock([id], 'bench/d');
          await store.containers.assign(id, 'bench/d', 'i-bench', node.id);
          token = l!.token;
        }
        const base = { id, node: node.id, token };
        const [started] = await reports.send([{ ...base, kind: 'start' }]);
        const end = { state: 'Complete' as const, exitCode: 0, oomKilled: false, usage: null };
        const [ended] = await reports.send([{ ...base, kind: 'end', end }]);
        if (!started!.ok || !ended!.ok) throw new Error(`lifecycle of ${id} refused`);
        return 1;
      };
    const ungrouped = new Reports(store.ctx, store.transitions, { maxItems: 1, maxInFlight: 64 });
    const lifecycleRuns: Record<string, number> = {};
    // Each lifecycle locks and assigns its own container in two statements (the rows kept from before),
    // except pass_64, where a pass loop locks and places what waits in one statement (the dispatcher's shape).
    for (const [name, reports, workers, pass] of [
      ['grouped_16', store.reports, 16, false],
      ['ungrouped_16', ungrouped, 16, false],
      ['grouped_64', store.reports, 64, false],
      ['pass_64', store.reports, 64, true],
    ] as const) {
      say(`container lifecycles through the store, ${name}, ${args.seconds}s…`);
      const commits0 = reports.stats.calls;
      const items0 = reports.stats.items;
      lifecycleRuns[name] = await profiled(name, () => load(workers, args.seconds, lifecycle(reports, pass)));
      const perCommit = (reports.stats.items - items0) / Math.max(1, reports.stats.calls - commits0);
      say(`  ${lifecycleRuns[name]!.toFixed(0)}/s (${perCommit.toFixed(1)} reports per commit)`);
    }
    const lifecycles = Math.max(lifecycleRuns.grouped_16!, lifecycleRuns.grouped_64!, lifecycleRuns.pass_64!);

    // First-page list latency with many rows.
    const have = Number((await pool.query('SELECT count(*) AS n FROM containers')).rows[0].n);
    const add = Math.max(0, args.rows - have);
    say(`filling the tables to ${args.rows.toLocaleString()} containers (+${add.toLocaleString()})…`);
    const t0 = performance.now();
    for (let done = 0; done < add; done += 100_000) {
      const n = Math.min(100_000, add - done);
      await pool.query(
        `WITH r AS (
           INSERT INTO container_requests (id, owner, command, vcpus, ram, priority, container_count_max, max_temp_retries, state, container_id, created_at, updated_at)
           SELECT 'r-' || lpad(to_hex($1::bigint + g), 16, '0'), 'bench', '["true"]', 1, 1073741824, 1 + (g % 1000), 3, 10, 'Committed',
                  'c-' || lpad(to_hex($1::bigint + g), 16, '0'), now(), now()
           FROM generate_series(1, $2::int) g RETURNING id, container_id, priority)
         INSERT INTO containers (id, request_id, owner, attempt, state, priority, vcpus, ram, scratch, gpus, preemptible, queued_at, created_at, updated_at)
         SELECT container_id, id, 'bench', 1, 'Queued', priority, 1, 1073741824, 0, 0, false, now(), now(), now() FROM r`,
        [done, n],
      );
    }
    await pool.query('ANALYZE');
    say(`  filled in ${((performance.now() - t0) / 1000).toFixed(1)}s`);
    const listLatency = async (path: string) => {
      const times: number[] = [];
      for (let i = 0; i < 200; i++) {
        const s = performance.now();
        const r = await fetch(`${url}${path}`, { headers });
        if (!r.ok) throw new Error(`${path}: HTTP ${r.status}`);
        await r.arrayBuffer();
        times.push(performance.now() - s);
      }
      times.sort((a, b) => a - b);
      return { p50_ms: +pct(times, 50).toFixed(2), p99_ms: +pct(times, 99).toFixed(2) };
    };
    const list = {
      containers: await listLatency('/v1/containers?limit=100'),
      containers_queued: await listLatency('/v1/containers?state=Queued&limit=100'),
      requests: await listLatency('/v1/requests?limit=100'),
    };
    if (args.profile) await printIndexUse(say, pool);
    await pool.end();
    agent.destroy();
    const result = {
      servers: args.servers,
      calls_by_server: perServer,
      rows: Math.max(args.rows, have),
      single_submissions_per_s: Math.round(single),
      batched_submissions_per_s: Math.round(batched),
      lifecycles_per_s: Math.round(lifecycles),
      lifecycles_by_run: Object.fromEntries(
        Object.entries(lifecycleRuns).map(([k, v]) => [k, Math.round(v)]),
      ),
      list_first_page: list,
      targets: { single: 3000, batched: 50000, lifecycles: 2000, list_p99_ms: 20 },
    };
    if (args.json) console.log(JSON.stringify(result, null, 2));
    else {
      console.log(
        `single submissions/s (16 clients):   ${result.single_submissions_per_s}${over} (target ≥ 3,000)`,
      );
      console.log(
        `batched submissions/s (1,000/call):  ${result.batched_submissions_per_s}${over} (target ≥ 50,000)`,
      );
      console.log(`store lifecycles/s (best run):       ${result.lifecycles_per_s} (target ≥ 2,000)`);
      for (const [k, v] of Object.entries(result.lifecycles_by_run))
        console.log(`  lifecycles/s, ${k.padEnd(13)}       ${v}`);
      for (const [k, v] of Object.entries(list))
        console.log(
          `first page of ${k} at ${result.rows.toLocaleString()} rows: p50 ${v.p50_ms} ms, p99 ${v.p99_ms} ms (target p99 ≤ 20 ms)`,
        );
    }
    return 0;
  } finally {
    // The other servers first: the first one's PostgreSQL serves them.
    for (const o of others) {
      o.proc.kill('SIGINT');
      await o.exited;
      rmSync(o.home, { recursive: true, force: true });
    }
    server.proc.kill('SIGINT');
    await server.exited;
    if (args.profile) printCpuProfile(say, join(home, 'cpuprof'), windows);
    rmSync(home, { recursive: true, force: true });
  }
}
