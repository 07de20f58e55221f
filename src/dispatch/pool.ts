// The dispatcher's instances: what it created or adopted, their lifecycle state (DESIGN §6.3), and the
// reconciliation with the cloud's list (adopt what we lost track of, forget what disappeared).
import type { CloudInstance, Tags } from '../cloud/driver.js';
import {
  INSTANCE_TRANSITIONS,
  isEndingInstanceState,
  type IdleBehavior,
  type InstanceState,
  type InstanceType,
} from '../model/types.js';
import type { NodeView } from './ports.js';

/** Tag keys Berth puts on every instance, so a restarted dispatcher can find and understand them. */
export const TAG = {
  cluster: 'berth-cluster',
  tag: 'berth-tag',
  type: 'berth-type',
  node: 'berth-node',
  idle: 'berth-idle-behavior',
} as const;

/** One instance in the dispatcher's view. */
export interface PoolInstance {
  id: string;
  type: string;
  providerType: string;
  price: number;
  createdAt: Date;
  state: InstanceState;
  stateSince: Date;
  idleBehavior: IdleBehavior;
  nodeId: string | null;
  /** Containers assigned to it (from the last snapshot). */
  containers: string[];
  /** When a destroy was last attempted (shutdown, destroy_pending), for retries after shutdown_retry. */
  destroyAttemptAt: number | null;
  preemptible: boolean;
  interruptionNotice: Date | null;
  /** The containers its create action was for (the scheduler's share rule: SnapshotInstance.createdFor). */
  createdFor?: string[];
  /** Its node's agent can claim lent room back (NodeView.reclaims; SnapshotInstance.reclaims). */
  reclaims?: boolean;
}

/**
 * Whether an illegal transition throws (under a test runner, or BERTH_STRICT_STATES=1) or is logged as an
 * error and ignored (production: the dispatcher keeps running on a bug rather than stop managing a fleet).
 */
export const STRICT_STATES = process.env.VITEST !== undefined || process.env.BERTH_STRICT_STATES === '1';

/** A transition the instance state machine (INSTANCE_TRANSITIONS in src/model/types.ts) forbids: a bug. */
export class IllegalInstanceTransition extends Error {}

/**
 * Moves an instance to `state` (DESIGN §6.3), the one place that checks INSTANCE_TRANSITIONS. Returns
 * whether the state changed; an illegal transition changes nothing and throws IllegalInstanceTransition.
 */
export function setState(inst: PoolInstance, state: InstanceState, now: Date): boolean {
  if (inst.state === state) return false;
  if (!INSTANCE_TRANSITIONS[inst.state].includes(state))
    throw new IllegalInstanceTransition(`instance ${inst.id}: illegal transition ${inst.state} → ${state}`);
  inst.state = state;
  inst.stateSince = now;
  return true;
}

/** An instance found in the cloud list that this process did not create (after a restart). */
export function adopt(ci: CloudInstance, types: Map<string, InstanceType>, now: Date): PoolInstance {
  const typeName = ci.tags[TAG.type] ?? ci.providerType;
  const type = types.get(typeName);
  const behavior = ci.tags[TAG.idle];
  return {
    id: ci.id,
    type: typeName,
    providerType: ci.providerType,
    price: type?.price ?? 0,
    createdAt: ci.createdAt,
    state: 'unknown',
    stateSince: now,
    // A type that left the configuration is drained: it finishes its work, gets none, and goes away.
    idleBehavior: !type ? 'drain' : behavior === 'hold' || behavior === 'drain' ? behavior : 'run',
    nodeId: ci.tags[TAG.node] ?? null,
    containers: [],
    destroyAttemptAt: null,
    preemptible: ci.preemptible,
    interruptionNotice: ci.interruptionNotice,
  };
}

export function instanceTags(
  cluster: string,
  tag: string,
  type: InstanceType,
  nodeId: string,
  idle: IdleBehavior,
): Tags {
  return {
    [TAG.cluster]: cluster,
    [TAG.tag]: tag,
    [TAG.type]: type.name,
    [TAG.node]: nodeId,
    [TAG.idle]: idle,
  };
}

/**
 * The instance state implied by its node (DESIGN §6.3): an instance whose agent registered and pings is
 * idle or running; one whose agent has not arrived is booting (an adopted one: since its creation, so the
 * boot timeout still applies).
 */
export function stateFromNode(inst: PoolInstance, node: NodeView | undefined): InstanceState {
  if (isEndingInstanceState(inst.state)) return inst.state;
  if (!node || node.state === 'registered' || node.lastPingAt === null) return 'booting';
  return inst.containers.length > 0 ? 'running' : 'idle';
}
