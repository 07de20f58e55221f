// The scheduler's input and output: a snapshot of the world and the actions to take (DESIGN §6.4).
// The plan function is pure: no I/O, no clock reads; `now` is part of the snapshot.
import type { SchedulerConfig } from '../../config/scheduler.js';
import type { ContainerState, IdleBehavior, InstanceState, InstanceType } from '../../model/types.js';

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
}

export interface SnapshotContainer {
  id: string;
  state: ContainerState;
  priority: number;
  queuedAt: Date;
  vcpus: number;
  ram: number;
  scratch: number;
  gpus: number;
  preemptible: boolean;
  /** Allowed instance type names; null = any. */
  instanceTypes: string[] | null;
  /** The instance the container is assigned to, if any. */
  instance: string | null;
  lockCount: number;
  /** Earlier attempts of its request ended by a spot interruption (absent: 0). */
  spotInterruptions?: number;
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
}

export type Action =
  | { op: 'create'; type: string; for: string[] }
  | { op: 'lock'; container: string }
  | { op: 'start'; container: string; instance: string }
  | { op: 'unlock'; container: string; reason: string }
  /** retryable false: no retry can succeed (no configured type can ever fit it), so its request ends. */
  | { op: 'cancel'; container: string; class: 'perm' | 'temp'; reason: string; retryable?: false }
  | { op: 'shutdown'; instance: string; reason: string }
  | { op: 'kill'; container: string; instance: string };

export interface Plan {
  actions: Action[];
  /**
   * A human-readable status for every waiting container (DESIGN §6.2 rule 7), by container id. A Map, not
   * an object: at 100k waiting containers the object's dictionary inserts were 40% of a pass.
   */
  status: Map<string, string>;
}
