// The chaos run (issue "Nothing lost, nothing run twice"): the real dispatcher on a PostgreSQL server of
// the run's own, the sim cloud with every fault knob turned, simulated agents, all on a virtual clock;
// the dispatcher is killed -9 three times and PostgreSQL restarted once. Virtual time is cheap: the loop
// jumps from event to event and the dispatcher ticks only when something happened (coalesced to at most
// one pass per virtual second) or its safety tick is due.
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SimCloud } from '../cloud/sim/sim-cloud.js';
import { LeaseLostError, type DispatchEvent } from '../dispatch/dispatcher.js';
import { seededRng } from '../model/clock.js';
import { normalizeRequest } from '../model/request.js';
import { VirtualClock } from '../sim/clock.js';
import { createPool, withDatabase, type Db } from '../store/db.js';
import { startEmbedded, type EmbeddedServer } from '../store/embedded.js';
import { migrate } from '../store/migrate.js';
import { Store } from '../store/store.js';
import { Agents } from './agents.js';
import { STALL_LIMIT_MS, check, type Check } from './checks.js';
import { DispatcherProcess, type KillPoint } from './dispatcher-process.js';
import { cloudOptions, CONFIG, fitsAvailableType, QUOTA, workload, type Job } from './world.js';

export interface ChaosOptions {
  containers: number;
  seed: number;
  /** Give up (a failed check) after this much wall time. Default 20 min. */
  wallLimitMs?: number;
  /** Stops the run early (a failed check); the server and its files are still cleaned up. */
  signal?: AbortSignal;
  /** Progress lines (to stderr in the CLI). */
  log?: (line: string) => void;
  /**
   * A deliberately broken dispatcher, to show that the stall check bites: once this share of requests
   * has finished, no pass runs for `forMs` of virtual time. Never set in a real chaos run.
   */
  freeze?: { atShare: number; forMs: number };
}

/** The faults the run injects into the control plane, in order, at a share of requests finished. */
const FAULTS: { at: number; what: 'kill' | 'pg-restart'; point?: KillPoint }[] = [
  { at: 0.05, what: 'kill', point: 'driver.create' }, // an instance exists that nobody recorded
  { at: 0.3, what: 'kill' }, // between passes
  { at: 0.5, what: 'pg-restart' },
  { at: 0.7, what: 'kill', point: 'queue.lock' }, // locks taken, nothing placed
];
/** An armed mid-pass kill that has not fired after this long becomes a kill between passes. */
const ARMED_FOR_MS = 1_200_000;
/**
 * The harness's safety tick: a pass at least this often (the dispatcher's own default tick_interval is
 * 1 s; 5 s keeps runs cheap). It bounds how long nothing can happen, so it must stay well under the stall
 * limit: at 10 s the longest stalls measured 9.1–9.6 s, at 5 s 4.6 s.
 */
const SAFETY_TICK_MS = 5_000;
const COALESCE_MS = 1_000;

export interface ChaosResult {
  options: { containers: number; seed: number };
  checks: Check[];
  figures: Record<string, number | string>;
  injected: Record<string, number>;
  faults: string[];
  ok: boolean;
}

/** Runs the chaos test on a PostgreSQL server of its own; cleans up the server and its files always. */
export async function runChaos(opts: ChaosOptions): Promise<ChaosResult> {
  const dir = mkdtempSync(join(tmpdir(), 'berth-chaos-'));
  chmodSync(dir, 0o755); // as root the server runs as the postgres user, which must reach it
  let server: EmbeddedServer | null = null;
  const pools: Db[] = [];
  try {
    server = await startEmbedded({ dataDir: join(dir, 'pgdata') });
    const setup = createPool(server.url, 1);
    await setup.query(`CREATE DATABASE chaos`);
    // Commits need not wait for the WAL flush on this throwaway server (most of a pass's time is commit
    // round trips). The restart is a clean shutdown, which flushes: nothing committed is lost.
    await setup.query(`ALTER DATABASE chaos SET synchronous_commit = off`);
    await setup.end();
    const url = withDatabase(server.url, 'chaos');
    const m = createPool(url, 1);
    await migrate(m);
    await m.end();
    const restart = async () => {
      const port = server!.port;
      await server!.stop();
      return async () => {
        server = await startEmbedded({ dataDir: join(dir, 'pgdata'), port });
      };
    };
    return await run(opts, url, pools, restart);
  } finally {
    for (const p of pools) await p.end().catch(() => {});
    await server?.stop().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  }
}

async function run(
  opts: ChaosOptions,
  url: string,
  pools: Db[],
  restartPg: () => Promise<() => Promise<void>>,
): Promise<ChaosResult> {
  const wallStart = Date.now();
  const wallLimit = opts.wallLimitMs ?? 20 * 60_000;
  const log = opts.log ?? (() => {});
  const { seed, containers: n } = opts;
  const clock = new VirtualClock('2026-01-01T00:00:00Z');
  const t0 = clock.nowMs();
  // The API server's store (agents and submissions) and an observer pool for the checks.
  const apiPool = createPool(url, 10);
  const observer = createPool(url, 2);
  pools.push(apiPool, observer);
  const store = new Store(apiPool, { clock, rng: seededRng(seed) });
  const cloud = new SimCloud(clock, cloudOptions(seed));

  const jobs = workload(n, seed);
  const jobByRequest = new Map<string, Job>();
  let lastProgressAt = t0;
  const progressCounts = new Map<string, number>();
  const progress = (what: string) => {
    lastProgressAt = clock.nowMs();
    progressCounts.set(what, (progressCounts.get(what) ?? 0) + 1);
  };
  let successes = 0;
  let dirty = true;
  const agents = new Agents(store, clock, jobByRequest, seed, progress, (_req, exitCode) => {
    if (exitCode === 0) successes++;
    dirty = true;
  });

  // Cloud events reach the agents; room for work (a free quota slot, or a live instance running nothing)
  // is remembered for the stall measure.
  // The last events of the control plane, for the log when a long stall is found (docs/performance/chaos.md).
  const recent: string[] = [];
  const remember = (line: string) => {
    recent.push(`${vt()} ${line}`);
    if (recent.length > 40) recent.shift();
  };
  let roomSince: number | null = t0;
  let broken = 0;
  let maxLive = 0;
  const terminatedAt = new Map<string, number>();
  cloud.onEvent((e) => {
    remember(`cloud ${e.type} ${e.id}`);
    if (e.type === 'agent-started') agents.booted(e.id, e.bootData);
    else if (e.type === 'broken') broken++;
    else if (e.type === 'terminated') {
      agents.terminated(e.id);
      terminatedAt.set(e.id, clock.nowMs());
      if (cloud.live < QUOTA && roomSince === null) roomSince = clock.nowMs();
    }
  });

  // Dispatcher processes.
  const events = new Map<string, number>();
  let created = 0;
  const cloudFaults: Record<string, number> = {};
  const onCloudCall = (op: string, err: Error | null) => {
    if (err !== null) {
      remember(`cloud call ${op} failed: ${err.message}`);
      // The dispatcher acted on the pool and the cloud refused (an injected fault): a destroy retried to
      // make room, or a create. That is no stall of the dispatcher's (docs/performance/chaos.md, "Stall
      // limit": two failed destroys in a row, 1 % per shutdown at destroyErrorRate 0.1, read as 10–13 s).
      if (op === 'create' || op === 'destroy') progress(`${op} refused by the cloud`);
    }
    if (err === null) {
      if (op === 'create') created++;
      return;
    }
    const k = `cloud ${op} errors (${err.constructor.name})`;
    cloudFaults[k] = (cloudFaults[k] ?? 0) + 1;
  };
  let generation = 0;
  const onEvent = (e: DispatchEvent) => {
    events.set(e.kind, (events.get(e.kind) ?? 0) + 1);
    if (e.kind !== 'containers-locked')
      remember(
        `dispatcher ${e.kind} ${'instance' in e ? e.instance : ''} ${'reason' in e ? e.reason : ''}${'message' in e ? e.message : ''}`,
      );
    if (e.kind === 'container-placed') agents.wake(e.instance);
    // The dispatcher acting on the queue or the pool is progress: placing work, and shutting an idle
    // instance down to make room (rule 5), as much as an instance coming up.
    if (
      e.kind === 'instance-created' ||
      e.kind === 'instance-ready' ||
      e.kind === 'container-placed' ||
      e.kind === 'instance-shutdown'
    )
      progress(e.kind);
    if (e.kind === 'node-lost') progress('node-lost'); // its Running containers finish (temp)
    dirty = true;
  };
  const spawn = () =>
    new DispatcherProcess(++generation, url, observer, clock, cloud, seed, onEvent, onCloudCall);
  let proc = spawn();
  let passes = 0;
  let passFailures = 0;
  /** Passes refused because another session held the lease: a killed process's lease must be free. */
  let leaseRefusals = 0;
  const faults: string[] = [];
  let nextFault = 0;
  let armedAt: number | null = null;
  let lastTick = -Infinity;
  let nextSafety = t0;

  const pass = async (): Promise<void> => {
    if (proc.dead) proc = spawn();
    const p = proc;
    passes++;
    remember(`pass ${passes}`);
    lastTick = clock.nowMs();
    nextSafety = lastTick + SAFETY_TICK_MS;
    dirty = false;
    // The pass and the creates and destroys it started (an armed kill may fire in one of them).
    const tick = p.dispatcher
      .tick()
      .finally(() => p.dispatcher.settled())
      .then(
        () => null,
        (err: Error) => err,
      );
    const outcome = await Promise.race([tick, p.killed.then(() => 'killed' as const)]);
    if (outcome === 'killed') {
      faults.push(`${vt()} dispatcher ${p.appName} killed ${await p.killed}`);
      armedAt = null;
      dirty = true;
    } else if (outcome !== null) {
      passFailures++;
      if (outcome instanceof LeaseLostError) leaseRefusals++;
      dirty = true; // retried by the next pass, as the real loop does
      log(`${vt()} pass failed: ${outcome.message}`);
    } else {
      // A retry's backoff ends: a pass then (the real dispatcher's 1 s safety tick would see it).
      const r = await observer.query(
        `SELECT min(run_after) AS at FROM containers WHERE state = 'Queued' AND run_after > $1`,
        [clock.now()],
      );
      const at = r.rows[0].at as Date | null;
      if (at !== null && at.getTime() < nextSafety) nextSafety = at.getTime();
    }
  };
  const vt = () => `t+${Math.round((clock.nowMs() - t0) / 1000)}s`;

  // Submissions, at their arrival times (batched per arrival time).
  const arrivals = new Map<number, Job[]>();
  for (const j of jobs)
    (arrivals.get(j.submitAtMs) ?? arrivals.set(j.submitAtMs, []).get(j.submitAtMs)!).push(j);
  const due: Job[][] = [];
  for (const [at, batch] of arrivals) clock.schedule(t0 + at, () => due.push(batch));
  const submit = async (batch: Job[]) => {
    const reqs = await store.requests.create(
      'chaos',
      batch.map((j) =>
        normalizeRequest({
          name: `job-${j.index}`,
          command: ['true'],
          vcpus: j.vcpus,
          ram: `${j.ramGiB}GiB`,
          priority: j.priority,
        }),
      ),
    );
    for (const r of reqs) jobByRequest.set(r.id, jobs[Number(r.name.slice(4))]!);
    dirty = true;
  };

  // The stall measure (see checks): runnable work and no progress.
  let maxStall = 0;
  let maxStallAt = '';
  const readySql = `SELECT id, request_id, GREATEST(COALESCE(run_after, created_at), created_at) AS ready
    FROM containers WHERE state = 'Queued' AND priority > 0 AND (run_after IS NULL OR run_after <= $1)
    ORDER BY 2 LIMIT 100`;
  const measureStall = async () => {
    const now = clock.nowMs();
    // Room: the dispatcher may create an instance, or a live one runs nothing (work goes there, or it is
    // shut down to make room). At the quota with every instance busy, waiting is no stall.
    if (cloud.live >= QUOTA && agents.idle() === 0) roomSince = null;
    else roomSince ??= now;
    if (roomSince === null || now - lastProgressAt <= STALL_LIMIT_MS / 2) return;
    const r = await observer.query(readySql, [new Date(now)]);
    const runnable = r.rows.filter((row) => fitsAvailableType(jobByRequest.get(row.request_id)!));
    if (runnable.length === 0) return;
    const readySince = (runnable[0].ready as Date).getTime();
    const stall = now - Math.max(lastProgressAt, readySince, roomSince);
    if (stall > maxStall) {
      maxStall = stall;
      // Why the last pass left the first runnable container waiting, and what the pool looked like: the
      // stall's cause without a rerun (docs/performance/chaos.md, "Stall limit").
      const why = proc.dispatcher.lastPlan?.statuses.toMap().get(runnable[0].id as string) ?? 'no plan';
      maxStallAt =
        `${vt()}: ${runnable.length} runnable, ${cloud.live} live instances, ${agents.idle()} idle agents; ` +
        `the last pass (at t+${Math.round((lastTick - t0) / 1000)}s) said of the first: ${why}`;
      if (stall > STALL_LIMIT_MS / 2)
        log(`${vt()} stall of ${stall / 1000} s; the last events:\n  ${recent.join('\n  ')}`);
    }
  };

  let leaseAfterRestart: string[] | null = null;
  let drainedAt: number | null = null;
  let allGoneAt: number | null = null;
  const doneSql = `SELECT count(*)::int AS n FROM container_requests WHERE state <> 'Final'`;
  let submitted = 0;
  let lastLog = Date.now();
  let frozenUntil: number | null = null;

  for (;;) {
    if (Date.now() - wallStart > wallLimit) {
      faults.push(`${vt()} gave up: wall limit of ${wallLimit / 1000}s reached`);
      break;
    }
    if (opts.signal?.aborted) {
      faults.push(`${vt()} gave up: interrupted`);
      break;
    }
    // Measured before this moment's events are handled: the state held since the previous moment.
    await measureStall();
    for (let b = due.shift(); b; b = due.shift()) {
      await submit(b);
      submitted += b.length;
    }
    await agents.drain();

    // Control-plane faults, at their share of requests finished.
    const f = FAULTS[nextFault];
    if (f && successes >= f.at * n) {
      nextFault++;
      if (f.what === 'pg-restart') {
        await pgRestart();
      } else if (f.point) {
        proc.armed = f.point;
        armedAt = clock.nowMs();
        faults.push(`${vt()} dispatcher ${proc.appName} armed to die after ${f.point}`);
      } else {
        await proc.kill('between passes');
        faults.push(`${vt()} dispatcher ${proc.appName} killed between passes`);
      }
    }
    if (armedAt !== null && clock.nowMs() - armedAt > ARMED_FOR_MS && !proc.dead) {
      faults.push(`${vt()} ${proc.armed} did not come within ${ARMED_FOR_MS / 1000}s: killed between passes`);
      armedAt = null;
      await proc.kill('between passes (armed kill did not fire)');
    }

    if (opts.freeze && frozenUntil === null && successes >= opts.freeze.atShare * n) {
      frozenUntil = clock.nowMs() + opts.freeze.forMs;
      faults.push(`${vt()} dispatcher frozen for ${opts.freeze.forMs / 1000} s (a stall on purpose)`);
    }
    const now = clock.nowMs();
    const frozen = frozenUntil !== null && now < frozenUntil;
    if (!frozen && ((dirty && now >= lastTick + COALESCE_MS) || now >= nextSafety || proc.dead)) await pass();
    await agents.drain();

    if (drainedAt === null && successes >= n) {
      const left = (await observer.query(doneSql)).rows[0].n as number;
      if (left === 0 && submitted === n) drainedAt = clock.nowMs();
    }
    // A run where some request ends without success: notice it without waiting for every success.
    if (drainedAt === null && submitted === n && passes % 200 === 0) {
      const left = (await observer.query(doneSql)).rows[0].n as number;
      if (left === 0) drainedAt = clock.nowMs();
    }
    maxLive = Math.max(maxLive, cloud.live);
    if (drainedAt !== null && cloud.live === 0) {
      allGoneAt = clock.nowMs();
      break;
    }
    if (
      drainedAt !== null &&
      clock.nowMs() - drainedAt > CONFIG.idleTimeoutMs + CONFIG.bootTimeoutMs + 600_000
    )
      break; // the drain check reports it
    if (Date.now() - lastLog > 10_000) {
      lastLog = Date.now();
      log(`${vt()} ${successes}/${n} done, ${cloud.live} instances, ${passes} passes`);
    }

    // Next: the next clock event, the safety tick, or the coalesced tick something asked for.
    const next = frozen
      ? Math.min(clock.peek() ?? Infinity, frozenUntil!)
      : Math.min(
          clock.peek() ?? Infinity,
          nextSafety,
          dirty ? Math.max(lastTick + COALESCE_MS, clock.nowMs()) : Infinity,
        );
    clock.runUntil(next);
  }

  // The PostgreSQL restart: processes keep going while the server is down and see their calls fail.
  async function pgRestart() {
    const start = await restartPg();
    const failedBefore = passFailures;
    await pass();
    const pingsDuringOutage = agents.live().length;
    let pingFailures = 0;
    for (const nodeId of agents.live()) {
      await store.nodes.ping(nodeId, 'busy').catch(() => pingFailures++);
    }
    await start();
    // The pools reconnect on their own: the same Store object and pools answer again.
    const deadline = Date.now() + 30_000;
    let storeRetries = 0;
    for (;;) {
      try {
        await store.containers.workFor('none', []);
        break;
      } catch (err) {
        storeRetries++;
        if (Date.now() > deadline) throw err;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    // The dispatcher's next pass takes its lease again (its lease connection died with the server).
    await pass();
    const holders = await observer.query(
      `SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
       WHERE l.locktype = 'advisory' AND l.granted`,
    );
    leaseAfterRestart = holders.rows.map((r) => r.application_name as string);
    faults.push(
      `${vt()} PostgreSQL restarted: during the outage ${pingFailures}/${pingsDuringOutage} agent pings and ${passFailures - failedBefore}/1 dispatcher passes failed; the store's pool answered again after ${storeRetries} failed tries; the lease is then held by [${leaseAfterRestart.join(', ')}]`,
    );
    dirty = true;
  }

  await proc.close();
  const wallMs = Date.now() - wallStart;
  const result = await check({
    db: observer,
    n,
    jobs: jobByRequest,
    agents: agents.records,
    cloud,
    drainedAt,
    allGoneAt,
    maxStall,
    maxStallAt,
    faults,
    generations: generation,
    leaseAfterRestart,
    leaseRefusals,
  });
  const injected: Record<string, number> = {
    'non-zero exits': [...agents.records.exits.values()].flat().filter((c) => c !== 0).length,
    'agents drawn to crash mid-container (1 in 7)': agents.records.doomed,
    'agent crashes': agents.records.crashes,
    'agent crashes with running containers': agents.records.crashesWithContainers,
    'containers killed by agent crashes': agents.records.kills.filter((k) => k.cause === 'agent-crash')
      .length,
    'dispatcher kills': faults.filter((f) => / killed /.test(f)).length,
    'PostgreSQL restarts': faults.filter((f) => f.includes('PostgreSQL restarted')).length,
  };
  return {
    options: { containers: n, seed },
    checks: result.checks,
    injected: { ...injected, 'instances that never booted': broken, ...cloudFaults },
    faults,
    ok: result.checks.every((c) => c.ok),
    figures: {
      containers: n,
      'containers run (starts)': agents.records.starts,
      'instances created': created,
      'most instances live at once': maxLive,
      'agents registered': agents.records.registered,
      'retries (requests with more than one container)': result.retried,
      'dispatcher passes': passes,
      'failed passes (retried)': passFailures,
      'passes refused for the lease': leaseRefusals,
      'agent calls retried after a lost connection': agents.records.retries,
      'virtual duration': `${Math.round(((allGoneAt ?? clock.nowMs()) - t0) / 1000)} s`,
      'drained at': drainedAt === null ? 'never' : `${Math.round((drainedAt - t0) / 1000)} s`,
      'longest stall': `${(maxStall / 1000).toFixed(1)} s`,
      'wall time': `${(wallMs / 1000).toFixed(1)} s`,
      ...Object.fromEntries([...events].map(([k, v]) => [`event ${k}`, v])),
    },
  };
}
