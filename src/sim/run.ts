// The simulation harness (DESIGN §10): a workload through the REAL Dispatcher, on a SimQueue, simulated
// agents and the sim cloud (wrapped in the same metrics and rate-limit decorators as a real driver), all
// on one VirtualClock. The harness decides nothing: it submits arrivals at their times, asks the
// dispatcher for a pass whenever something it would react to happened, and records what the report needs.
//
// When passes happen: at every instant where an arrival, an instance registration or a container exit
// happened (several at one instant coalesce into one pass), at the deadlines the dispatcher acts on
// (idle timeout after an instance empties, boot timeout, node_lost_after after an agent stops, a retry's
// run_after, a rate limit's earliest retry), and on a periodic safety tick while anything is alive.
// With dispatcher.min_pass_interval > 0, passes are at least that far apart (large runs: one pass per
// arrival second at 10k instances is far more than a real dispatcher's pass rate).
import { Registry } from 'prom-client';
import { withMetrics } from '../cloud/decorators/metrics.js';
import { withRateLimit } from '../cloud/decorators/rate-limit.js';
import type { Driver } from '../cloud/driver.js';
import { RateLimitError } from '../cloud/errors.js';
import { SimCloud } from '../cloud/sim/sim-cloud.js';
import { DISPATCHER_TIMERS } from '../dispatch/config.js';
import {
  Dispatcher,
  LeaseLostError,
  type DispatchEvent,
  type PlannerCounts,
} from '../dispatch/dispatcher.js';
import { namedRng } from '../model/clock.js';
import { VACATED } from '../dispatch/scheduler/vacate.js';
import { poolCounts } from '../dispatch/scheduler/kept-pool.js';
import { ClaimBack, opportunisticFields, traceUse, type OpportunisticStats } from './opportunistic.js';
import type { InstanceType } from '../model/types.js';
import { SimAgents, simBootData } from './agents.js';
import { VirtualClock } from './clock.js';
import type { SimConfig } from './config.js';
import { makePolicy, type PolicyName } from './policies.js';
import { SimQueue, type RequestOutcomes } from './queue.js';
import { buildReport, type Report } from './report/build.js';
import type { ContainerRecord, InstanceRecord, RunRecord } from './report/input.js';
import { WaitCauses } from './wait-causes.js';
import { WorkflowEngine } from './workflows.js';
import type { WorkflowRun, WorkloadJob } from './workload/types.js';

/** Where virtual time starts (any fixed instant: reports print times relative to it). */
export const SIM_EPOCH = Date.parse('2026-01-01T00:00:00Z');

/**
 * A workload job, optionally with the exit code its container reports (default 0), and whether it is
 * opportunistic instead of the seeded draw (opportunistic.fraction).
 */
export type SimJob = WorkloadJob & { exitCode?: number; opportunistic?: boolean };

export interface RunOptions {
  /** Sorted by arrival (as loadWorkload returns them). */
  jobs: SimJob[];
  /** Workflow runs, sorted by arrival: their tasks are submitted as their parents finish (closed loop). */
  workflows?: WorkflowRun[];
  config: SimConfig;
  seed: number;
  policy: PolicyName;
  /** Called every `progressEvery` passes (for progress lines on long runs). */
  onProgress?: (p: Progress) => void;
  progressEvery?: number;
  /** Record what each container's wait was spent on (report.waitCauses; src/sim/wait-causes.ts). */
  waitCauses?: boolean;
}

export interface Progress {
  virtualMs: number;
  /** Requests submitted: jobs and workflow tasks. */
  submitted: number;
  /** Requests the workload holds in all: jobs and the tasks of every workflow run. */
  jobs: number;
  active: number;
  liveInstances: number;
  passes: number;
}

export interface RunStats {
  /** Dispatcher passes run. */
  passes: number;
  /** Clock events run (arrivals, boots, starts, exits, deadlines). */
  events: number;
  /** Passes that threw (a failed cloud list or queue call), retried a second later. */
  failedPasses: number;
  /** Dispatcher error events (failed actions, retried by the next pass). */
  dispatchErrors: number;
  createFailures: number;
  /** Nodes the dispatcher declared lost while their machine was alive (silent agents). */
  nodesLost: number;
  /** Agents that could not register (should be 0). */
  refusedAgents: number;
  /** Requests by outcome at the end of the run. */
  requests: RequestOutcomes;
  /** The run stopped at config.timeLimitMs with work or instances left. */
  hitTimeLimit: boolean;
  /** Virtual ms from the start to the end of the run. */
  virtualMs: number;
  /** Opportunistic containers and guaranteed ones claiming capacity back (src/sim/opportunistic.ts). */
  opportunistic: OpportunisticStats;
  /**
   * Passes that planned in full and those that reused the last plan, and what the full ones kept from the
   * last pass (Dispatcher.plannerStats).
   */
  planner: PlannerCounts;
}

export interface RunResult {
  record: RunRecord;
  report: Report;
  stats: RunStats;
}

/** Runs one simulation to the end (every container final and every instance gone) or the time limit. */
export async function runSimulation(o: RunOptions): Promise<RunResult> {
  const cfg = o.config;
  const start = SIM_EPOCH;
  const clock = new VirtualClock(start);
  const policy = makePolicy(o.policy, cfg.scheduler);
  const cloud = new SimCloud(clock, {
    ...cfg.cloud,
    outages: (cfg.cloud.outages ?? []).map((w) => ({
      ...w,
      fromMs: w.fromMs + start,
      untilMs: w.untilMs + start,
    })),
    seed: o.seed,
    recordCalls: false,
  });
  const stats: RunStats = {
    passes: 0,
    failedPasses: 0,
    events: 0,
    dispatchErrors: 0,
    createFailures: 0,
    nodesLost: 0,
    refusedAgents: 0,
    requests: { success: 0, failed: 0, cancelled: 0, open: 0 },
    hitTimeLimit: false,
    virtualMs: 0,
    opportunistic: { submitted: 0, grew: 0, claimsBack: 0, requeued: 0, guaranteedShort: 0, vacated: 0 },
    planner: {
      full: 0,
      reused: 0,
      queue: { merged: 0, sorted: 0 },
      pool: poolCounts(),
    },
  };

  // --- when to run a pass -------------------------------------------------------------------------
  let passWanted = false;
  let inPass = false;
  const deadlines = new Set<number>();
  // What the dispatcher does itself during a pass (cancels, node failures) needs no second pass.
  const passNow = (): void => {
    if (!inPass) passWanted = true;
  };
  const passAt = (at: number): void => {
    const t = Math.max(at, clock.nowMs());
    if (deadlines.has(t)) return;
    deadlines.add(t);
    clock.schedule(t, () => {
      deadlines.delete(t);
      passWanted = true;
    });
  };
  // A pass at the idle timeout only if the instance really stayed idle that long (a cheap check event
  // instead of a pass: most instances get new work first).

  // --- records for the report ---------------------------------------------------------------------
  const containerRecs = new Map<string, ContainerRecord>();
  const causes = o.waitCauses === true ? new WaitCauses() : null;
  // Names and recorded usage of the requests not yet final (right-sizing; most jobs carry neither).
  const jobMeta = new Map<string, Pick<SimJob, 'name' | 'usage'>>();
  const instanceRecs = new Map<string, InstanceRecord>();
  const typeByName = new Map<string, InstanceType>(cfg.catalog.map((t) => [t.name, t]));

  // The dispatcher's timers the simulator's config does not set keep the dispatch config's defaults.
  const timers = DISPATCHER_TIMERS.fieldsOf({ ...DISPATCHER_TIMERS.defaults(), ...cfg.dispatcher });
  const queue = new SimQueue({
    now: () => clock.nowMs(),
    rng: namedRng(o.seed, 'retry'),
    maxDispatchAttempts: cfg.scheduler.maxDispatchAttempts,
    largestRam: Math.max(...cfg.catalog.map((t) => t.ram)) - cfg.scheduler.ramOverhead,
    resume: cfg.opportunistic.resume ? { moveMs: cfg.opportunistic.moveMs } : null,
    observer: {
      created: (c) => {
        const s = c.request.spec;
        const meta = jobMeta.get(s.id);
        containerRecs.set(c.id, {
          ...(meta?.name === undefined ? {} : { name: meta.name }),
          ...(meta?.usage === undefined ? {} : { usage: meta.usage }),
          id: c.id,
          arrival: clock.nowMs(),
          start: null,
          end: null,
          vcpus: s.vcpus,
          ram: s.ram,
          scratch: s.scratch,
          gpus: s.gpus,
          preemptible: s.preemptible,
          instance: null,
        });
      },
      assigned: (nodeId, c) => agents.assigned(nodeId, c),
      started: (c) => {
        const r = containerRecs.get(c.id)!;
        r.start = clock.nowMs();
        r.instance = c.instance;
        if (causes !== null) r.waitCauses = causes.started(c.id, r.arrival, r.start);
      },
      ended: (c, wasRunning) => {
        const r = containerRecs.get(c.id)!;
        if (wasRunning && r.end === null) r.end = clock.nowMs();
        if (c.state === 'Complete') r.exitCode = c.request.spec.exitCode;
        causes?.forget(c.id);
        agents.ended(c);
        passNow();
      },
      requestFinal: (spec, outcome) => {
        jobMeta.delete(spec.id);
        if (engine.requestFinal(spec.id, outcome)) armSafety();
      },
      runnableAt: (at) => passAt(at),
      nodeFailed: (nodeId) => agents.nodeFailed(nodeId),
    },
  });

  const claim = new ClaimBack(queue);
  const oppRng = namedRng(o.seed, 'opportunistic');
  const agents = new SimAgents({
    clock,
    queue,
    cloud,
    startDelayMs: cfg.agent.startDelayMs,
    pingIntervalMs: cfg.agent.pingIntervalMs,
    sampleAfterMs: cfg.scheduler.opportunisticMinObservationMs,
    onGrow: (instanceId, nodeId, running) => {
      const type = cfg.catalog.find((t) => t.name === instanceRecs.get(instanceId)?.type);
      if (type !== undefined) claim.grew(type, cfg.scheduler.ramOverhead, nodeId, running);
      passNow();
    },
    onRegistered: (instanceId) => {
      const r = instanceRecs.get(instanceId);
      if (r !== undefined) r.ready = clock.nowMs();
      passNow();
    },
    onStopped: (instanceId, running) => {
      const inst = cloud.get(instanceId);
      if (inst?.state === 'terminated' && inst.interruptionNotice !== null) queue.interrupted(running);
      for (const c of running) {
        const r = containerRecs.get(c.id)!;
        if (r.end === null) r.end = clock.nowMs();
      }
      // The dispatcher learns of a silent agent only through node_lost_after.
      passAt(clock.nowMs() + cfg.dispatcher.nodeLostAfterMs + cfg.agent.pingIntervalMs + 1);
    },
  });

  cloud.onEvent((e) => {
    if (e.type !== 'terminated') return;
    const r = instanceRecs.get(e.id);
    if (r !== undefined && r.destroyed === null) r.destroyed = e.at.getTime();
    if (r !== undefined && e.reason === 'interrupted') r.interrupted = true;
    if (e.reason !== 'destroyed') passNow();
  });

  // --- the driver, decorated as in production, plus a thin layer that learns retry times ------------
  const metered = withMetrics(cloud, { registry: new Registry(), clock, driverName: 'sim' });
  const limited = withRateLimit(metered, {
    clock,
    opsPerSecond: cfg.limits.opsPerSecond,
    burst: cfg.limits.burst ?? undefined,
    maxConcurrentCreates: cfg.limits.maxConcurrentCreates,
  });
  // The dispatcher retries a failed call in a later pass; make sure there is one when the retry is
  // allowed: at a rate limit's earliest retry, or a second after a failed create. (Failed destroys come
  // back as dispatcher error events, below; a destroy of an instance the cloud already forgot is not a
  // failure worth a pass.)
  const watch = async <T>(call: () => Promise<T>, isCreate = false): Promise<T> => {
    try {
      return await call();
    } catch (err) {
      if (err instanceof RateLimitError) passAt(err.earliestRetry.getTime());
      else if (isCreate) passAt(clock.nowMs() + 1000);
      throw err;
    }
  };
  const driver: Driver = {
    create: (t, tags, boot) => watch(() => limited.create(t, tags, boot), true),
    list: (f) => watch(() => limited.list(f)),
    destroy: (id) => watch(() => limited.destroy(id)),
    setTags: (id, tags) => watch(() => limited.setTags(id, tags)),
  };

  const onEvent = (e: DispatchEvent): void => {
    switch (e.kind) {
      case 'instance-created': {
        const t = typeByName.get(e.type);
        instanceRecs.set(e.instance, {
          id: e.instance,
          type: e.type,
          price: t?.price ?? e.price,
          created: e.at.getTime(),
          ready: null,
          destroyed: null,
        });
        // The boot timeout matters only for an instance whose agent never came.
        const rec = instanceRecs.get(e.instance)!;
        clock.schedule(e.at.getTime() + policy.config.bootTimeoutMs + 1, () => {
          if (rec.ready === null && rec.destroyed === null) passWanted = true;
        });
        break;
      }
      case 'container-cancelled':
        // A vacated container's retry is Queued at once: it wants a pass of its own, as the store's notify
        // would wake the dispatcher for it.
        if (e.reason.startsWith(VACATED)) {
          claim.stats.vacated++;
          passAt(e.at.getTime());
        }
        break;
      case 'create-failed':
        stats.createFailures++;
        // A type paused by a capacity error comes back after the dispatcher's capacity TTL (60 s).
        passAt(e.at.getTime() + 60_001);
        break;
      case 'node-lost': {
        // The dispatcher also reports the node of an instance it shut down itself when a sync forgets
        // it; only a node whose machine was still alive was really lost.
        const rec = e.instance === null ? undefined : instanceRecs.get(e.instance);
        if (rec === undefined || rec.destroyed === null) stats.nodesLost++;
        break;
      }
      case 'error':
        stats.dispatchErrors++;
        // Failed destroys are retried after the dispatcher's shutdown_retry; other actions next pass.
        passAt(e.at.getTime() + timers.shutdownRetryMs + 1);
        break;
      default:
        break;
    }
  };

  const dispatcher = new Dispatcher({
    id: 'sim-dispatcher',
    cluster: 'sim',
    tag: 'sim',
    queue,
    driver,
    clock,
    instanceTypes: cfg.catalog,
    config: policy.config,
    ...timers,
    bootData: simBootData,
    planner: policy.planner,
    onEvent,
    maxConcurrentCreates: cfg.limits.maxConcurrentCreates,
  });

  // --- submissions: open-loop jobs at their arrival, workflow tasks when their parents are done -------
  const submit = (j: SimJob): void => {
    if (j.name !== undefined || j.usage !== undefined) jobMeta.set(j.id, { name: j.name, usage: j.usage });
    const opp =
      cfg.opportunistic.fraction > 0 || j.opportunistic !== undefined
        ? opportunisticFields(j.duration, traceUse(j), cfg.opportunistic, oppRng, j.opportunistic)
        : {};
    if (opp.opportunistic) claim.stats.submitted++;
    queue.submit({
      id: j.id,
      vcpus: j.vcpus,
      ram: j.ram,
      scratch: j.scratch,
      gpus: j.gpus,
      preemptible: j.preemptible,
      priority: j.priority,
      durationMs: j.duration,
      exitCode: j.exitCode ?? 0,
      ...(j.name === undefined ? {} : { name: j.name }),
      ...(j.requestedTime === undefined ? {} : { expectedRunMs: j.requestedTime }),
      ...opp,
    });
    passNow();
  };
  const engine = new WorkflowEngine({
    now: () => clock.nowMs(),
    start,
    submit,
    rememberRuns: cfg.workflowEstimates === 'previous',
  });

  // One pending arrival event per stream at a time keeps the heap small.
  const arrivals = <T extends { arrival: number }>(items: T[], take: (item: T) => void) => {
    let next = 0;
    const schedule = (): void => {
      if (next >= items.length) return;
      const at = items[next]!.arrival;
      clock.schedule(start + at, () => {
        while (next < items.length && items[next]!.arrival === at) take(items[next++]!);
        armSafety();
        schedule();
      });
    };
    schedule();
    return { done: () => next >= items.length, count: () => next };
  };
  const jobs = o.jobs;
  const runs = o.workflows ?? [];
  const jobArrivals = arrivals(jobs, submit);
  const runArrivals = arrivals(runs, (r) => engine.start(r));
  const workflowTasks = runs.reduce((n, r) => n + r.workflow.tasks.length, 0);

  // --- the safety tick: only while something is alive, so idle stretches of a trace cost nothing ----
  let safetyArmed = false;
  const quiet = (): boolean => queue.activeCount === 0 && cloud.live === 0;
  const armSafety = (): void => {
    if (safetyArmed) return;
    safetyArmed = true;
    clock.schedule(clock.nowMs() + cfg.dispatcher.safetyTickMs, () => {
      safetyArmed = false;
      passWanted = true;
      if (!quiet()) armSafety();
    });
  };

  const lastArrival = Math.max(
    jobs.length === 0 ? 0 : jobs[jobs.length - 1]!.arrival,
    runs.length === 0 ? 0 : runs[runs.length - 1]!.arrival,
  );
  const limit = start + (cfg.timeLimitMs ?? lastArrival + 30 * 86_400_000);
  const every = o.progressEvery ?? 5000;
  const done = (): boolean => jobArrivals.done() && runArrivals.done() && engine.open === 0 && quiet();
  // dispatcher.min_pass_interval: a pass wanted sooner than that after the last one waits for one
  // deferred pass (0, the default, never defers: every instant with news gets its pass).
  const minGap = cfg.dispatcher.minPassIntervalMs;
  let lastPassAt = -Infinity;
  let deferred = false;
  for (;;) {
    if (passWanted && clock.nowMs() < lastPassAt + minGap) {
      passWanted = false;
      if (!deferred) {
        deferred = true;
        clock.schedule(lastPassAt + minGap, () => {
          deferred = false;
          passWanted = true;
        });
      }
    }
    if (passWanted) {
      passWanted = false;
      lastPassAt = clock.nowMs();
      inPass = true;
      try {
        await dispatcher.tick();
        // Creates and destroys run in the background; on the virtual clock they end at this instant.
        await dispatcher.settled();
        if (causes !== null && dispatcher.lastPlan !== null)
          causes.observe(dispatcher.lastPlan.statuses, clock.nowMs());
      } catch (err) {
        // As `berth dispatch`'s loop (src/dispatch/run.ts): a failed pass (e.g. the cloud list of a sync
        // refused by a rate limit) is retried by a later pass, never a crash. A lost lease cannot happen
        // with one dispatcher; if it did, the run is wrong and must stop.
        if (err instanceof LeaseLostError) throw err;
        stats.failedPasses++;
        passAt(clock.nowMs() + 1000);
      } finally {
        inPass = false;
      }
      stats.passes++;
      // The dispatcher decides on the clock too (idle instances kept warm or paid for, boot timeouts,
      // billing windows, recent arrivals leaving the window): the instant its plan could change with no
      // event gets a pass.
      const wake = dispatcher.nextDecisionAt();
      if (wake > clock.nowMs() && wake <= limit) passAt(wake);
      if (!quiet()) armSafety();
      if (stats.passes % every === 0)
        o.onProgress?.({
          virtualMs: clock.nowMs() - start,
          submitted: jobArrivals.count() + engine.submitted,
          jobs: jobs.length + workflowTasks,
          active: queue.activeCount,
          liveInstances: cloud.live,
          passes: stats.passes,
        });
    }
    if (done()) break;
    const at = clock.peek();
    if (at === null || at > limit) {
      stats.hitTimeLimit = true;
      break;
    }
    // Every event of this instant runs before the one pass they ask for.
    while (clock.peek() === at) {
      clock.next();
      stats.events++;
    }
  }
  await dispatcher.stop();
  stats.refusedAgents = agents.refused;
  stats.requests = queue.outcomes();
  const end = clock.nowMs();
  stats.virtualMs = end - start;
  stats.opportunistic = claim.stats;
  stats.planner = dispatcher.plannerStats;

  const record: RunRecord = {
    policy: o.policy,
    seed: o.seed,
    instanceTypes: cfg.catalog,
    containers: [...containerRecs.values()],
    instances: [...instanceRecs.values()],
    billing: cfg.billing,
    ...(runs.length === 0 ? {} : { workflows: engine.runs() }),
    startTime: start,
    endTime: end,
  };
  return { record, report: buildReport(record), stats };
}
