// One pass of the slurm backend as a pure function (like the cloud scheduler's plan): from the database's
// containers and nodes and squeue's jobs, the actions that bring the two into line and a status text for
// every waiting container. The only link is the job name (the container id); the job ↔ node binding is
// recorded on the node (instance_id `slurm-job-ID`), and a held container is judged by the job of its node:
// with allocation reuse (docs/SLURM.md) a started job runs further containers, each moved to its node from
// a node whose job had not started (src/store/transitions/move.ts). What the process remembers between passes (backoff,
// released and orphaned jobs) is an input, and its next value an output, so this stays a function.
//
// | container (by this dispatcher)  | its SLURM job                      | action                                |
// |---------------------------------|------------------------------------|---------------------------------------|
// | Queued, runnable                | none live                          | submit (lock, node, assign, sbatch)   |
// | Queued, runnable                | live (an earlier attempt's)        | wait; the job is cancelled            |
// | Locked                          | pending                            | renice to Berth's order; status       |
// | Locked                          | pending, held for BadConstraints   | release once, then cancel (perm)      |
// | Locked                          | running                            | status: its agent is starting it      |
// | Running in another allocation   | its own job, pending               | scancel (superseded; not a failure)   |
// | Running in another allocation   | its own job, started anyway        | its agent exits; scancel after orphan_grace |
// | Locked, no node                 | —                                  | unlock (nothing was submitted)        |
// | Locked, node not bound to a job | none live                          | unlock after submit_grace             |
// | Locked, bound                   | ended or gone                      | unlock                                |
// | Locked, priority 0 (withdrawn)  | any                                | unlock; scancel a live job            |
// | Running, priority 0 (withdrawn) | running                            | cancel (user): its agent stops it     |
// | Running                         | its node's job ended or gone       | cancel (temp): retried                |
// | Running                         | running, agent silent              | cancel (temp), scancel                |
// | anything else (ended, unlocked) | live                               | scancel (pending: now; else after orphan_grace) |
// | —                               | node with neither container nor live job | retire the node (token revoked) |
import { isHeld, isLive, type SlurmJob } from './squeue.js';
import { endedText, pendingStatus, reasonText, startingStatus } from './reasons.js';
import { planNice, reniceCalls, type NiceJob } from './nice.js';
import { sbatchArgs, type SbatchConfig, type SubmitSpec } from './sbatch.js';
import type { SlurmConfig } from './config.js';
import { SLURM_JOB_INSTANCE_PREFIX } from '../../store/transitions/move.js';

/** A container this dispatcher holds. */
export interface HeldContainer {
  id: string;
  state: 'Locked' | 'Running';
  priority: number;
  /** Last change of the row (the assignment, for a Locked one). */
  updatedAt: Date;
  nodeId: string | null;
}

/** A runnable Queued container (priority > 0, run_after passed), in Berth's order. */
export interface QueuedContainer extends SubmitSpec {
  priority: number;
}

/** A node record of this dispatcher that is not failed. */
export interface NodeInfo {
  id: string;
  /** `slurm-job-ID` once bound to its job. */
  instanceId: string | null;
  lastPingAt: Date | null;
}

/** What the process remembers between passes (lost on restart, which costs at most a delay). */
export interface SlurmMemory {
  /** No sbatch before this time (ms since the epoch) after a temp failure, and why. */
  backoffUntil: number;
  backoffFailures: number;
  backoffMessage: string;
  /** Held (BadConstraints) jobs already released once. */
  released: ReadonlySet<string>;
  /** Live jobs whose container ended or was given back, with when that was first seen (ms). */
  orphanSince: ReadonlyMap<string, number>;
}

export const EMPTY_MEMORY: SlurmMemory = {
  backoffUntil: 0,
  backoffFailures: 0,
  backoffMessage: '',
  released: new Set(),
  orphanSince: new Map(),
};

export interface SlurmSnapshot {
  now: Date;
  held: HeldContainer[];
  queued: QueuedContainer[];
  nodes: NodeInfo[];
  /** This dispatcher's jobs (by marker): the live ones, and the ended jobs of held containers SLURM still keeps. */
  jobs: SlurmJob[];
  /**
   * The state of containers named by live jobs that are neither held nor runnable-queued here (null: not
   * in this database; such jobs are left alone).
   */
  others: ReadonlyMap<string, string | null>;
  memory: SlurmMemory;
}

export type PlanConfig = SbatchConfig &
  Pick<
    SlurmConfig,
    'maxJobs' | 'niceSpread' | 'lowerNice' | 'nodeLostAfterMs' | 'submitGraceMs' | 'orphanGraceMs'
  >;

export type SlurmAction =
  /** Lock, record a node, assign, sbatch with this nice. */
  | { op: 'submit'; container: QueuedContainer; nice: number }
  /** Record the job of a container's node (after a restart cut the submission short). */
  | { op: 'bind'; container: string; node: string; job: string }
  | { op: 'unlock'; container: string; reason: string }
  | { op: 'cancel'; container: string; class: 'temp' | 'perm' | 'user'; reason: string }
  /** Declares the node failed: its token is revoked (its agent, if any, stops). */
  | { op: 'retire'; node: string; reason: string }
  | { op: 'scancel'; job: string; reason: string }
  | { op: 'release'; job: string }
  | { op: 'renice'; nice: number; jobs: string[] };

export interface SlurmPlan {
  actions: SlurmAction[];
  status: Map<string, string>;
  memory: SlurmMemory;
}

/** A node bound to a SLURM job has the instance id `slurm-job-ID` (one owner: the store's move transition). */
const JOB_INSTANCE_PREFIX = SLURM_JOB_INSTANCE_PREFIX;
/** The instance id a container has between its assignment and sbatch's answer. */
export const SUBMITTING_INSTANCE = 'slurm-submitting';

/** Why a container of priority 0 is given back or cancelled (the cloud dispatcher's words). */
const WITHDRAWN = 'priority is 0 (withdrawn)';

/** The instance id that stands for a SLURM job (on nodes and containers). */
export function jobInstance(jobId: string): string {
  return `${JOB_INSTANCE_PREFIX}${jobId}`;
}

/** The SLURM job a node record is bound to (null before sbatch answered). */
export function boundJob(node: NodeInfo | undefined): string | null {
  return node?.instanceId?.startsWith(JOB_INSTANCE_PREFIX)
    ? node.instanceId.slice(JOB_INSTANCE_PREFIX.length)
    : null;
}

const byJobId = (a: SlurmJob, b: SlurmJob) => Number(a.id) - Number(b.id) || a.id.localeCompare(b.id);

export function planSlurm(s: SlurmSnapshot, cfg: PlanConfig): SlurmPlan {
  const now = s.now.getTime();
  const actions: SlurmAction[] = [];
  const status = new Map<string, string>();
  const released = new Set(s.memory.released);
  const nodes = new Map(s.nodes.map((n) => [n.id, n]));
  const jobsById = new Map(s.jobs.map((j) => [j.id, j]));
  const liveById = new Map(s.jobs.filter(isLive).map((j) => [j.id, j]));
  /** Held containers running in another job's allocation, with that job: their own jobs are superseded. */
  const movedTo = new Map<string, string>();
  const liveByName = new Map<string, SlurmJob[]>();
  /** Each name's newest job in any state (how an ended one ended). */
  const lastByName = new Map<string, SlurmJob>();
  for (const j of [...s.jobs].sort(byJobId)) {
    lastByName.set(j.name, j);
    if (isLive(j)) (liveByName.get(j.name) ?? liveByName.set(j.name, []).get(j.name)!).push(j);
  }
  /** Live jobs that belong to a held container's current placement. */
  const claimed = new Set<string>();
  /** Nodes still needed (a held container's). */
  const keepNodes = new Set<string>();
  const pending: NiceJob[] = [];
  const retire = (node: string | null, reason: string) => {
    if (node && nodes.has(node)) actions.push({ op: 'retire', node, reason });
  };

  for (const c of s.held) {
    const node = c.nodeId ? nodes.get(c.nodeId) : undefined;
    const bound = boundJob(node);
    const live = liveByName.get(c.id) ?? [];
    // The job of its node (its own, or the allocation it was moved to); unbound, its own by name.
    const job = bound !== null ? liveById.get(bound) : live[0];
    // Its node's job named after another container: it was moved into that job's allocation.
    const nodeJob = bound !== null ? jobsById.get(bound) : undefined;
    if (nodeJob && nodeJob.name !== c.id) movedTo.set(c.id, nodeJob.id);
    if (job) {
      claimed.add(job.id);
      if (bound === null && node) actions.push({ op: 'bind', container: c.id, node: node.id, job: job.id });
    }
    if (c.nodeId) keepNodes.add(c.nodeId);

    // Priority 0 withdraws a container (as on the cloud backend): not scheduled, killed if running.
    if (c.priority === 0 && (job || c.state === 'Locked')) {
      if (c.state === 'Running') {
        // Its agent stops the container and the job ends; a job that lingers is an orphan (below).
        actions.push({ op: 'cancel', container: c.id, class: 'user', reason: WITHDRAWN });
        continue;
      }
      actions.push({ op: 'unlock', container: c.id, reason: WITHDRAWN });
      if (job) actions.push({ op: 'scancel', job: job.id, reason: WITHDRAWN });
      retire(c.nodeId, 'its container was withdrawn (priority 0)');
      continue;
    }

    if (c.state === 'Running') {
      if (!job) {
        actions.push({
          op: 'cancel',
          container: c.id,
          class: 'temp',
          reason: `${endedText(c.id, bound, bound !== null ? jobsById.get(bound) : lastByName.get(c.id))} while the container was running`,
        });
        retire(c.nodeId, 'its SLURM job ended');
        continue;
      }
      const ping = node?.lastPingAt?.getTime() ?? null;
      if (ping !== null && now - ping > cfg.nodeLostAfterMs) {
        const silent = Math.round((now - ping) / 1000);
        actions.push({
          op: 'cancel',
          container: c.id,
          class: 'temp',
          reason: `its agent in SLURM job ${job.id} sent no ping for ${silent}s (node_lost_after ${Math.round(cfg.nodeLostAfterMs / 1000)}s)`,
        });
        actions.push({ op: 'scancel', job: job.id, reason: 'its agent went silent' });
        retire(c.nodeId, 'its agent went silent');
      }
      continue;
    }

    // Locked.
    if (!job) {
      if (!c.nodeId || !node) {
        // Locked by a process that stopped before it recorded a node: nothing was submitted.
        actions.push({
          op: 'unlock',
          container: c.id,
          reason: 'not submitted to SLURM (the dispatcher restarted)',
        });
        retire(c.nodeId, 'its container was given back');
      } else if (bound !== null) {
        actions.push({
          op: 'unlock',
          container: c.id,
          reason: `${endedText(c.id, bound, bound !== null ? jobsById.get(bound) : lastByName.get(c.id))} before its agent started the container`,
        });
        retire(c.nodeId, 'its SLURM job ended');
      } else if (now - c.updatedAt.getTime() >= cfg.submitGraceMs) {
        actions.push({
          op: 'unlock',
          container: c.id,
          reason: `no SLURM job named ${c.id} after ${Math.round(cfg.submitGraceMs / 1000)}s (its submission was cut short)`,
        });
        retire(c.nodeId, 'its container was given back');
      } else {
        status.set(c.id, 'being submitted to SLURM');
      }
      continue;
    }
    if (job.state !== 'PENDING') {
      status.set(c.id, startingStatus(job));
      continue;
    }
    if (isHeld(job) && job.reason.startsWith('BadConstraints')) {
      if (!released.has(job.id)) {
        // SLURM re-checks a released job at once: a node that came back (or was reconfigured) takes it.
        actions.push({ op: 'release', job: job.id });
        released.add(job.id);
        status.set(c.id, pendingStatus(job));
      } else {
        actions.push({
          op: 'cancel',
          container: c.id,
          class: 'perm',
          reason: `SLURM job ${job.id} is held: ${reasonText(job.reason)} (SLURM reason: ${job.reason})`,
        });
        actions.push({ op: 'scancel', job: job.id, reason: 'held for bad constraints' });
        retire(c.nodeId, 'its SLURM job was cancelled');
      }
      continue;
    }
    status.set(c.id, pendingStatus(job));
    if (!isHeld(job))
      pending.push({ key: job.id, berthPriority: c.priority, base: job.priority + job.nice, nice: job.nice });
  }

  // Live jobs no held container claims: their container ended, was given back, or has a newer job.
  const orphanSince = new Map<string, number>();
  const blocked = new Set<string>();
  const queuedIds = new Set(s.queued.map((q) => q.id));
  const heldIds = new Set(s.held.map((c) => c.id));
  for (const [name, jobs] of liveByName) {
    const state = heldIds.has(name) ? 'held' : queuedIds.has(name) ? 'Queued' : s.others.get(name);
    // Not in this database (or not looked up): not ours to touch.
    if (state === null || state === undefined) continue;
    const moved = movedTo.get(name);
    const why =
      moved !== undefined
        ? `superseded: its container runs in the allocation of SLURM job ${moved}`
        : state === 'held'
          ? "another job is its container's current one"
          : `its container is ${state}`;
    for (const job of jobs) {
      if (claimed.has(job.id)) continue;
      if (state === 'Queued') blocked.add(name);
      if (job.state === 'PENDING') {
        actions.push({ op: 'scancel', job: job.id, reason: why });
        continue;
      }
      const since = s.memory.orphanSince.get(job.id) ?? now;
      orphanSince.set(job.id, since);
      if (now - since >= cfg.orphanGraceMs)
        actions.push({
          op: 'scancel',
          job: job.id,
          reason: `${why} and the job still runs after ${Math.round(cfg.orphanGraceMs / 1000)}s`,
        });
    }
  }
  for (const id of released) if (!jobsById.has(id)) released.delete(id);

  // Nodes with neither a held container nor a live job (their job ended, or a restart left them behind).
  const liveIds = new Set([...liveByName.values()].flat().map((j) => j.id));
  for (const n of s.nodes) {
    if (keepNodes.has(n.id)) continue;
    const bound = boundJob(n);
    if (bound !== null && liveIds.has(bound)) continue;
    actions.push({
      op: 'retire',
      node: n.id,
      reason: bound !== null ? 'its SLURM job ended' : 'not bound to a SLURM job',
    });
  }

  // Submissions, in Berth's order, within max_jobs and outside a backoff.
  let room = cfg.maxJobs - liveIds.size;
  const submit: QueuedContainer[] = [];
  const backingOff = now < s.memory.backoffUntil;
  for (const c of s.queued) {
    const args = sbatchArgs(c, cfg, { nice: 0, marker: '' });
    if (!args.ok) {
      actions.push({ op: 'cancel', container: c.id, class: 'perm', reason: args.reason });
      continue;
    }
    if (blocked.has(c.id)) {
      status.set(c.id, `waiting for a SLURM job of an earlier attempt to end`);
      continue;
    }
    if (backingOff) {
      status.set(
        c.id,
        `waiting to be submitted: sbatch failed (${s.memory.backoffMessage}); next try at ${new Date(s.memory.backoffUntil).toISOString()}`,
      );
      continue;
    }
    if (room <= 0) {
      status.set(
        c.id,
        `waiting to be submitted: this dispatcher has max_jobs (${cfg.maxJobs}) jobs in SLURM`,
      );
      continue;
    }
    room--;
    submit.push(c);
  }

  const nice = planNice(
    [...pending, ...submit.map((c) => ({ key: c.id, berthPriority: c.priority, base: null, nice: 0 }))],
    { spread: cfg.niceSpread, canLower: cfg.lowerNice },
  );
  const current = new Map(pending.map((p) => [p.key, p.nice]));
  const existing = new Map([...nice].filter(([k]) => current.has(k)));
  for (const call of reniceCalls(current, existing)) actions.push({ op: 'renice', ...call });
  for (const c of submit) actions.push({ op: 'submit', container: c, nice: nice.get(c.id) ?? 0 });

  return {
    actions,
    status,
    memory: { ...s.memory, released, orphanSince },
  };
}

/** The backoff after a temp sbatch failure: doubles from 2 s up to 1 min. */
export function nextBackoff(m: SlurmMemory, nowMs: number, message: string): SlurmMemory {
  const failures = m.backoffFailures + 1;
  return {
    ...m,
    backoffFailures: failures,
    backoffUntil: nowMs + Math.min(60_000, 2000 * 2 ** (failures - 1)),
    backoffMessage: message,
  };
}

/** A successful sbatch ends the backoff. */
export function clearBackoff(m: SlurmMemory): SlurmMemory {
  return m.backoffFailures === 0 ? m : { ...m, backoffFailures: 0, backoffUntil: 0, backoffMessage: '' };
}
