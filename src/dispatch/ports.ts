// What the dispatcher needs from the world, as two small interfaces (like Arvados' queue and pool):
// the container queue with its nodes (PostgreSQL in production, an in-memory queue in the simulator) and
// a cloud Driver (src/cloud/driver.ts). The dispatcher loop itself is the same everywhere.
import type { FailureClass } from '../model/types.js';
import type { SnapshotContainer } from './scheduler/types.js';

/** A node (an agent on an instance) as the dispatcher sees it. */
export interface NodeView {
  id: string;
  instanceId: string;
  /** registered = recorded, agent not yet arrived; idle/busy/draining/drained; failed. */
  state: 'registered' | 'idle' | 'busy' | 'draining' | 'drained' | 'failed';
  /** Last ping (or registration); null while the agent has not registered. */
  lastPingAt: Date | null;
}

/**
 * How long a failed node stays in nodes(): long enough for the dispatcher to see it failed and shut its
 * instance down, short enough that the list holds only recent failures. Measured on the application clock.
 */
export const FAILED_NODE_VISIBLE_MS = 3_600_000;

/**
 * The queue and node records, for one dispatcher. Every method is one transaction. Times that decide
 * something are the dispatcher's clock (`now`), never the database's: tests and the simulator control it.
 */
export interface DispatchQueue {
  /**
   * Takes (first call) or renews this dispatcher's lease; false when another live process holds it. Also
   * releases the unplaced locks of other dispatchers of the cluster whose heartbeat is older than lostAfterMs.
   */
  heartbeat(
    dispatcherId: string,
    cluster: string,
    tag: string,
    now: Date,
    lostAfterMs: number,
  ): Promise<boolean>;
  /** Releases the lease at a graceful stop: its unplaced Locked containers go back to the queue. */
  release(dispatcherId: string, now: Date): Promise<void>;
  /**
   * The containers the scheduler considers: Queued ones with priority > 0 whose run_after has passed, and
   * every container locked by this dispatcher (Locked or Running, with the instance it is assigned to).
   */
  containers(dispatcherId: string, now: Date): Promise<SnapshotContainer[]>;
  /** Queued → Locked; returns the ids actually locked (others were taken or changed meanwhile). */
  lock(ids: string[], dispatcherId: string): Promise<string[]>;
  unlock(id: string, dispatcherId: string, reason: string): Promise<void>;
  /** Places a Locked container on an instance (its node, if registered, then starts it). */
  assign(id: string, dispatcherId: string, instanceId: string, nodeId: string | null): Promise<void>;
  /** `retryable: false`: no retry can succeed, so the request ends now (src/model/retry.ts). */
  cancel(
    id: string,
    dispatcherId: string,
    failureClass: FailureClass,
    reason: string,
    opts?: { retryable?: boolean },
  ): Promise<void>;

  /**
   * Records a node for an instance about to be created and returns the one-time secret for its boot
   * data; bindNode then records the cloud's instance id once create() returned it.
   */
  createNode(
    instanceType: string,
    cluster: string,
    tag: string,
  ): Promise<{ nodeId: string; bootstrapSecret: string }>;
  bindNode(nodeId: string, instanceId: string): Promise<void>;
  /** Nodes of this cluster/tag; failed ones for FAILED_NODE_VISIBLE_MS after they failed. */
  nodes(cluster: string, tag: string, now: Date): Promise<NodeView[]>;
  /**
   * Declares a node failed: its token is revoked, its Locked containers go back to the queue and its
   * Running containers are cancelled (temp) so they are retried elsewhere.
   */
  failNode(nodeId: string, reason: string): Promise<void>;
  /** Asks a node to drain (finish what it runs, start nothing new). */
  drainNode(nodeId: string): Promise<void>;
  /**
   * max_dispatch_attempts as the queue enforces it (DESIGN §3.3): the scheduler's copy for a pass, so the
   * two never disagree.
   */
  maxDispatchAttempts(): Promise<number>;
  /** Stores the scheduler's status text of waiting containers (only changed ones are passed). */
  setStatuses(statuses: Map<string, string>): Promise<void>;
}
