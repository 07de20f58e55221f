/**
 * Berth's domain types.
 *
 * Glossary (DESIGN.md §1):
 * - container request: what a user submits (image, command, resources, priority, retry policy); it is
 *   satisfied by one or more containers (attempts).
 * - container: one attempt to run a request: Queued → Locked → Running → Complete | Cancelled.
 * - instance type: a machine shape from configuration (vcpus, ram, scratch, gpus, price, preemptible).
 * - instance: a machine a dispatcher created, tagged so it can be found again after a restart.
 * - node: the agent's side of an instance (registered, idle, busy, draining, drained, failed).
 * - dispatcher: the process that plans (scheduler) and acts (pool + driver) for one cluster.
 * - driver: the adapter to one cloud API (create, list by tag, destroy).
 * - runtime: how an agent runs a container (docker, podman, runc, process).
 */

/** Resources a container asks for or an instance type offers. Bytes for sizes, CPUs may be fractional. */
export interface Resources {
  vcpus: number;
  ram: number;
  scratch: number;
  gpus: number;
}

export const CONTAINER_STATES = ['Queued', 'Locked', 'Running', 'Complete', 'Cancelled'] as const;
export type ContainerState = (typeof CONTAINER_STATES)[number];

/**
 * The container state machine (DESIGN §3.2): the only legal transitions. The store enforces these
 * inside the transaction that makes the change; nothing else re-checks them.
 *
 * | from    | to        | who                                                  |
 * |---------|-----------|------------------------------------------------------|
 * | Queued  | Locked    | a dispatcher (new lock token, lock_count += 1)       |
 * | Locked  | Queued    | the lock holder (lock token revoked)                 |
 * | Locked  | Running   | the assigned agent, holding the per-lock token       |
 * | Queued  | Cancelled | user, priority 0, or the system with a reason        |
 * | Locked  | Cancelled | user, the lock holder, or the system with a reason   |
 * | Running | Cancelled | user, the agent/dispatcher, or the system            |
 * | Running | Complete  | the agent (exit code, usage)                         |
 */
export const CONTAINER_TRANSITIONS: Readonly<Record<ContainerState, readonly ContainerState[]>> = {
  Queued: ['Locked', 'Cancelled'],
  Locked: ['Queued', 'Running', 'Cancelled'],
  Running: ['Complete', 'Cancelled'],
  Complete: [],
  Cancelled: [],
};

export function isLegalTransition(from: ContainerState, to: ContainerState): boolean {
  return CONTAINER_TRANSITIONS[from].includes(to);
}

export function isFinalContainerState(s: ContainerState): boolean {
  return s === 'Complete' || s === 'Cancelled';
}

/** Why a container was cancelled: decides whether and how it is retried (DESIGN §3.3). */
export const FAILURE_CLASSES = ['user', 'temp', 'perm'] as const;
export type FailureClass = (typeof FAILURE_CLASSES)[number];

export const REQUEST_STATES = ['Committed', 'Final'] as const;
export type RequestState = (typeof REQUEST_STATES)[number];

/** Node (agent) states (DESIGN §3.4). */
export const NODE_STATES = ['registered', 'idle', 'busy', 'draining', 'drained', 'failed'] as const;
export type NodeState = (typeof NODE_STATES)[number];

/**
 * Instance lifecycle (DESIGN §6.3).
 *
 * | from    | to       | when                                                           |
 * |---------|----------|----------------------------------------------------------------|
 * | booting | idle     | its agent registered                                           |
 * | booting | shutdown | boot_timeout passed without registration                       |
 * | unknown | idle/running | after a restart, its node is found alive                   |
 * | unknown | shutdown | probe_timeout passed with no live node                         |
 * | idle    | running  | a container was started on it                                  |
 * | running | idle     | its last container ended                                       |
 * | idle    | shutdown | idle_timeout (inside the billing window), drain, or not needed |
 * | *       | shutdown | its node failed                                                |
 * | shutdown| gone     | the cloud list no longer shows it                              |
 */
export const INSTANCE_STATES = ['booting', 'unknown', 'idle', 'running', 'shutdown', 'gone'] as const;
export type InstanceState = (typeof INSTANCE_STATES)[number];

/** What an instance does when idle: run (normal), hold (no new work, never shut down), drain. */
export const IDLE_BEHAVIORS = ['run', 'hold', 'drain'] as const;
export type IdleBehavior = (typeof IDLE_BEHAVIORS)[number];

/** Token scopes (DESIGN §4). */
export const SCOPES = ['admin', 'user', 'dispatcher', 'node'] as const;
export type Scope = (typeof SCOPES)[number];

/** A machine shape from configuration. */
export interface InstanceType extends Resources {
  name: string;
  /** The provider's own name for the shape (e.g. "m5.large"); defaults to name. */
  providerType: string;
  /** Price per hour in the configured currency. */
  price: number;
  preemptible: boolean;
}
