// Who may make which container transition, and what a Locked → Queued does past max_dispatch_attempts:
// the pure rules both queues apply (DESIGN §3.2–3.3). The store (src/store/transitions/) writes them as
// SQL guards for its fast path and asks refusal() why an item was refused; the simulator's queue
// (src/sim/queue.ts) asks refusal() before each change. The contract suite (test/contract/) checks that
// both give the same outcomes.
import {
  CONTAINER_STATES,
  CONTAINER_TRANSITIONS,
  isFinalContainerState,
  type ContainerState,
  type NodeState,
} from './types.js';

/** The container facts a transition's guard looks at. Times in ms. */
export interface ContainerFacts {
  id: string;
  state: ContainerState;
  lockedBy: string | null;
  nodeId: string | null;
  instanceId: string | null;
  /** The lock generation: a per-lock token is valid for one generation only. */
  generation: number;
  lockCount: number;
  owner: string;
  priority: number;
  runAfter: number | null;
}

/** Who asks for a transition; decides what they may change. */
export type Actor =
  /** A dispatcher: the lock holder (or, to cancel, anyone's Queued container). */
  | { kind: 'dispatcher'; id: string }
  /** An agent reporting on a container assigned to its node; generation null: its token is not valid. */
  | { kind: 'agent'; node: string; generation: number | null }
  /** A user (owner) or an admin (owner null). */
  | { kind: 'user'; owner: string | null }
  /** The failure of a node, for what it holds. */
  | { kind: 'node'; node: string }
  /** The system (an unsatisfiable request, a withdrawn one): no actor check. */
  | { kind: 'system' };

/** The node a transition targets (assign's, or the reporting agent's): its state, null when unknown. */
export interface NodeFacts {
  id: string;
  state: NodeState | null;
}

/**
 * Whether a node may be given work and start it: it is known and has not been declared failed (DESIGN
 * §3.4). A failed node's Locked containers were requeued when it failed; one placed there afterwards (a
 * plan from a snapshot taken before the failure) would wait for a start that must never come.
 */
export function nodeTakesWork(state: NodeState | null): boolean {
  return state !== null && state !== 'failed';
}

export type TransitionKind = 'lock' | 'requeue' | 'assign' | 'start' | 'complete' | 'cancel';

/** The state each kind of transition leads to (assign keeps a container Locked). */
export const TRANSITION_TARGET: Readonly<Record<TransitionKind, ContainerState>> = {
  lock: 'Locked',
  requeue: 'Queued',
  assign: 'Locked',
  start: 'Running',
  complete: 'Complete',
  cancel: 'Cancelled',
};

/** The states `kind` may start from: from the transition table (assign: Locked only). */
export function statesFrom(kind: TransitionKind): ContainerState[] {
  if (kind === 'assign') return ['Locked'];
  const to = TRANSITION_TARGET[kind];
  return CONTAINER_STATES.filter((s) => CONTAINER_TRANSITIONS[s].includes(to));
}

/**
 * Why a transition is refused: what the caller sees (NotFound, Forbidden, Conflict; already_finished is
 * the conflict of a cancel with nothing left to stop, which `berth cancel` reports as done).
 */
export interface Refusal {
  code: 'not_found' | 'forbidden' | 'conflict' | 'already_finished';
  reason: string;
}

const conflict = (reason: string): Refusal => ({ code: 'conflict', reason });

/**
 * Why `actor` may not make transition `kind` on the container (`c` undefined: there is none), or null
 * when it may. `nowMs` decides whether a run_after has passed. `node`: the node an assign places it on,
 * or the node of the agent reporting a start; one that does not take work (nodeTakesWork) refuses both,
 * after the other checks.
 */
export function refusal(
  kind: TransitionKind,
  id: string,
  c: ContainerFacts | undefined,
  actor: Actor,
  nowMs: number,
  node?: NodeFacts | null,
): Refusal | null {
  if (c === undefined) return { code: 'not_found', reason: `container ${id} not found` };
  // A refused state names the transition; for unlock and assign it is checked before the holder (a
  // holder means nothing once the container moved on), for the others after who asks.
  if (kind === 'requeue') return stateRefusal(kind, c) ?? actorRefusal(kind, c, actor);
  if (kind === 'assign')
    return stateRefusal(kind, c) ?? actorRefusal(kind, c, actor) ?? nodeRefusal(kind, c.id, node);
  const r = actorRefusal(kind, c, actor) ?? stateRefusal(kind, c);
  if (kind === 'start') return r ?? nodeRefusal(kind, c.id, node);
  if (r || kind !== 'lock') return r;
  if (c.priority <= 0) return conflict(`container ${c.id} has priority 0 (withdrawn)`);
  if (c.runAfter !== null && c.runAfter > nowMs)
    return conflict(`container ${c.id} may not run before ${new Date(c.runAfter).toISOString()}`);
  return null;
}

/** Why a container may not be placed on, or started by, `node` (null or absent: no node named), or null. */
export function nodeRefusal(
  kind: 'assign' | 'start',
  id: string,
  node: NodeFacts | null | undefined,
): Refusal | null {
  if (node == null || nodeTakesWork(node.state)) return null;
  const why = node.state === null ? `node ${node.id} is unknown` : `node ${node.id} was declared failed`;
  return conflict(
    kind === 'start'
      ? `${why}; it may not start container ${id}`
      : `${why}; container ${id} is not placed on it`,
  );
}

function stateRefusal(kind: TransitionKind, c: ContainerFacts): Refusal | null {
  if (statesFrom(kind).includes(c.state)) return null;
  if (kind === 'assign')
    return conflict(`container ${c.id} is ${c.state}; only a Locked container can be assigned`);
  if (kind === 'lock') return conflict(`container ${c.id} is ${c.state}, not Queued`);
  if (kind === 'cancel' && isFinalContainerState(c.state))
    return { code: 'already_finished', reason: `container ${c.id} has already finished (${c.state})` };
  return conflict(`illegal transition for container ${c.id}: ${c.state} → ${TRANSITION_TARGET[kind]}`);
}

function actorRefusal(kind: TransitionKind, c: ContainerFacts, actor: Actor): Refusal | null {
  switch (actor.kind) {
    case 'dispatcher': {
      // A dispatcher cancels what it holds, or a Queued container nobody holds (e.g. unsatisfiable).
      const free = kind === 'lock' || (kind === 'cancel' && c.lockedBy === null);
      if (free || c.lockedBy === actor.id) return null;
      const held = c.lockedBy === null ? 'not locked' : `locked by ${c.lockedBy}`;
      return conflict(`container ${c.id} is ${held}, not by ${actor.id}`);
    }
    case 'agent':
      if (c.nodeId !== actor.node)
        return { code: 'forbidden', reason: `container ${c.id} is not assigned to node ${actor.node}` };
      if (actor.generation !== c.generation)
        return conflict(
          `stale lock token for container ${c.id}: it was unlocked, cancelled or re-locked since`,
        );
      return null;
    case 'user':
      // Another user's container looks absent: nothing to probe.
      return actor.owner !== null && c.owner !== actor.owner
        ? { code: 'not_found', reason: `container ${c.id} not found` }
        : null;
    case 'node':
      return c.nodeId === actor.node ? null : conflict(`container ${c.id} is not on node ${actor.node}`);
    case 'system':
      return null;
  }
}

/** What a Locked → Queued does: the max_dispatch_attempts-th one cancels perm instead (DESIGN §3.3). */
export type RequeueDecision = { kind: 'requeue' } | { kind: 'cancel'; failureClass: 'perm'; reason: string };

export function requeueDecision(
  lockCount: number,
  maxDispatchAttempts: number,
  why: string,
): RequeueDecision {
  if (lockCount < maxDispatchAttempts) return { kind: 'requeue' };
  return {
    kind: 'cancel',
    failureClass: 'perm',
    reason: `locked and unlocked ${lockCount} times (max_dispatch_attempts=${maxDispatchAttempts}); last: ${why}`,
  };
}

/** The reasons both queues write for transitions the system makes (the same text on both sides). */
export const REASONS = {
  /** Why a Locked container goes back to the queue when its node fails. */
  nodeFailedRequeue: (node: string, why: string) => `node ${node} failed before starting it (${why})`,
  /** Why a Running container is cancelled (temp) when its node fails. */
  nodeFailedCancel: (node: string, why: string) => `node ${node} failed: ${why}`,
  /** Why a lost dispatcher's unplaced locks go back to the queue. */
  dispatcherLost: (dispatcher: string) => `dispatcher ${dispatcher} lost its lease (no heartbeat)`,
  /** Why a stopping dispatcher's unplaced locks go back to the queue. */
  released: (dispatcher: string) => `released by dispatcher ${dispatcher} (stopping)`,
};
