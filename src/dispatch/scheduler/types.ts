// The scheduler's input and output: a snapshot of the world and the actions to take (DESIGN §6.4).
// The plan function is pure: no I/O, no clock reads; `now` is part of the snapshot.
import type { SchedulerConfig } from '../../config/scheduler.js';
import type { ContainerState, IdleBehavior, InstanceState, InstanceType } from '../../model/types.js';
import type { Statuses } from './statuses.js';

/** Scheduler configuration, declared with every other option (src/config/scheduler.ts). */
export type { SchedulerConfig };

export interface SnapshotInstance {
  id: string;
  type: string;
  state: InstanceState;
  idleBehavior: IdleBehavior;
  /** Ids of the containers assigned to (locked for or running on) this instance. */
  containers: string[];
  /** When the instance entered its current state. */
  stateSince: Date;
  /** When the instance was created (for billing windows); defaults to stateSince. */
  createdAt: Date;
  /** The containers its create action was for (share_rule expected lets them take it once ready). */
  createdFor?: string[];
  /**
   * Its agent can claim lent room back: its pressure watcher runs, so it freezes and requeues borrowers
   * when a guaranteed container grows back (the node's ping says so; issue 16). Only such an instance lends
   * its guaranteed containers' unused room (opportunistic.ts). Absent: false, it lends nothing.
   */
  reclaims?: boolean;
}

/** What a container needs and which types it may use: its shape. */
export interface ContainerShape {
  vcpus: number;
  ram: number;
  scratch: number;
  gpus: number;
  preemptible: boolean;
  /** Allowed instance type names; null = any. */
  instanceTypes: string[] | null;
}

export interface SnapshotContainer extends ContainerShape {
  id: string;
  state: ContainerState;
  priority: number;
  queuedAt: Date;
  /** The instance the container is assigned to, if any. */
  instance: string | null;
  lockCount: number;
  /** Who submitted it: per-user limits and fair sharing between owners; '' when unknown. */
  owner: string;
  /** Earlier attempts of its request ended by a spot interruption (absent: 0). */
  spotInterruptions?: number;
  /**
   * It may run in capacity other containers reserve but do not use, and be frozen and requeued when they
   * claim it back (issue 16; opportunistic.ts). Absent: false (a guaranteed container).
   */
  opportunistic?: boolean;
  /** What a Running container was measured using so far (its agent's samples); absent: not measured. */
  usage?: MeasuredUsage;
  /**
   * A Queued opportunistic container whose request's last attempt was reclaimed (its `reclaim` event): the
   * instance that reclaimed it and when (ms). It is not placed into that instance's lent room for
   * RECLAIM_AVOID_MS (opportunistic.ts).
   */
  reclaimedFrom?: { instance: string; at: number };
  /** Its request's name: run-time history is kept by the name's step (durations.ts); absent: none. */
  name?: string;
  /** When a Running container started (run-time history, ../run-history.ts); absent: not known. */
  startedAt?: Date;
  /**
   * The run time its submitter expects, ms (end_aligned, aligned.ts; in the simulator the SWF requested
   * time); absent: the step's history decides (durations.ts).
   */
  expectedRunMs?: number;
}

/** A running container's measured use: what opportunistic placement may borrow (opportunistic.ts). */
export interface MeasuredUsage {
  /** Peak memory since it started, bytes. */
  ram: number;
  /** Average CPUs used since it started. */
  vcpus: number;
  /** How long it has been measured, ms. */
  observedMs: number;
}

/**
 * Containers of one shape that arrived (were first queued) in the last `config.arrivalWindowMs`: the
 * recent arrival rate, which says whether an idle instance is likely to be used again soon.
 */
export interface ArrivalCount extends ContainerShape {
  count: number;
}

export interface CloudState {
  /** The cloud told us this is the most instances we may have (quota error); null = unknown. */
  quotaMaxInstances: number | null;
  /** Types that returned capacity errors recently. */
  unavailableTypes: string[];
  /** No create may be attempted before this time. */
  rateLimitedUntil: Date | null;
}

export interface Snapshot {
  now: Date;
  config: SchedulerConfig;
  instanceTypes: InstanceType[];
  instances: SnapshotInstance[];
  containers: SnapshotContainer[];
  cloud: CloudState;
  /** Recent arrivals by shape (reuse likelihood); empty when unknown. */
  arrivals: ArrivalCount[];
  /** Run-time and boot-time estimates from history (durations.ts); absent: none known. */
  estimates?: RunEstimates;
}

/**
 * What history says about the near future (wait_for_running): how long a new instance takes to boot, and
 * when each Running container whose run time can be estimated is expected to end. One owner computes
 * them (../run-history.ts) for the dispatcher and so for the simulator, which runs the real dispatcher.
 */
export interface RunEstimates {
  /** The median of recently observed boots (create → agent ready), ms; null while none was observed. */
  bootMs: number | null;
  /** Expected end (ms since the epoch) of Running containers, by container id. */
  endsAt: Record<string, number>;
  /** The run time expected of a container of each step (durations.ts runKey), ms. */
  steps: Record<string, number>;
  /** How many containers, of which shape, arrived per end of a container of each step (boot_ahead, ahead.ts). */
  fanOut?: Record<string, FanOut>;
}

/** What the end of one container of a step brings (boot_ahead): arrivals per end, and their usual shape. */
export interface FanOut {
  /** The mean number of containers that arrived per end, over the step's recent ends. */
  perEnd: number;
  /** The shape of the step's most recent arrivals. */
  shape: ContainerShape;
}

export type Action =
  | { op: 'create'; type: string; for: string[] }
  | { op: 'lock'; container: string }
  | { op: 'start'; container: string; instance: string }
  | { op: 'unlock'; container: string; reason: string }
  /**
   * retryable false: no retry can succeed (no configured type can ever fit it), so its request ends.
   * reclaimed: a running opportunistic container taken off its instance (vacate.ts): retried at once,
   * counting no failure, as when its agent reclaims it (src/model/retry.ts).
   */
  | {
      op: 'cancel';
      container: string;
      class: 'perm' | 'temp';
      reason: string;
      retryable?: false;
      reclaimed?: true;
    }
  | { op: 'shutdown'; instance: string; reason: string }
  | { op: 'kill'; container: string; instance: string };

export interface Plan {
  actions: Action[];
  /**
   * A human-readable status for every waiting container (DESIGN §6.2 rule 7), by container id, as
   * `berth plan` prints it. Built from `statuses` when first read: a pass itself builds no text per
   * waiting container (at a million waiting, those strings were most of a pass).
   */
  readonly status: Map<string, string>;
  /** The same statuses, grouped by reason: what the dispatcher stores (statuses.ts). */
  readonly statuses: Statuses;
  /**
   * The plan stays what a pass would give until this time (ms) if nothing but the clock changes: the
   * first instant a timeout, a billing period or a rate limit flips a decision. Infinity when none does.
   */
  readonly validUntil: number;
}
