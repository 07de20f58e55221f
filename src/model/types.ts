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
 * Instance lifecycle (DESIGN §6.3): the only legal transitions, enforced by setState() in
 * src/dispatch/pool.ts (an illegal one is a bug: it throws in tests and is logged in production).
 *
 * | from            | to              | when                                                        |
 * |-----------------|-----------------|-------------------------------------------------------------|
 * | booting         | idle, running   | its agent registered (and was given work)                   |
 * | unknown         | booting         | after a restart, its agent has not registered yet           |
 * | unknown         | idle, running   | after a restart, its node is found alive                    |
 * | idle            | running         | a container was started on it                               |
 * | running         | idle            | its last container ended                                    |
 * | any live state  | shutdown        | boot timeout, idle timeout, drain, node failed or lost, kill |
 * | shutdown        | destroy_pending | the cloud accepted its destroy (billing ends)               |
 * | any state       | gone            | the cloud's list no longer shows it                         |
 *
 * Live states are booting, unknown, idle and running. An instance in shutdown or destroy_pending still
 * counts against max_instances and the spend cap (the cloud may still bill it) until it is gone; the
 * dispatcher retries its destroy every shutdown_retry until then.
 */
export const INSTANCE_STATES = [
  'booting',
  'unknown',
  'idle',
  'running',
  'shutdown',
  'destroy_pending',
  'gone',
] as const;
export type InstanceState = (typeof INSTANCE_STATES)[number];

export const INSTANCE_TRANSITIONS: Readonly<Record<InstanceState, readonly InstanceState[]>> = {
  booting: ['idle', 'running', 'shutdown', 'gone'],
  unknown: ['booting', 'idle', 'running', 'shutdown', 'gone'],
  idle: ['running', 'shutdown', 'gone'],
  running: ['idle', 'shutdown', 'gone'],
  shutdown: ['destroy_pending', 'gone'],
  destroy_pending: ['gone'],
  gone: [],
};

/** Whether an instance was chosen for shutdown (or is gone): it takes no work and is not shut down again. */
export function isEndingInstanceState(s: InstanceState): boolean {
  return s === 'shutdown' || s === 'destroy_pending' || s === 'gone';
}

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
