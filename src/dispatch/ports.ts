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

/** The queue and node records, for one dispatcher. Every method is one transaction. */
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
  release(dispatcherId: string): Promise<void>;
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
  /** Nodes of this cluster/tag (failed ones included while their instance may still exist). */
  nodes(cluster: string, tag: string): Promise<NodeView[]>;
  /**
   * Declares a node failed: its token is revoked, its Locked containers go back to the queue and its
   * Running containers are cancelled (temp) so they are retried elsewhere.
   */
  failNode(nodeId: string, reason: string): Promise<void>;
  /** Asks a node to drain (finish what it runs, start nothing new). */
  drainNode(nodeId: string): Promise<void>;
  /** Stores the scheduler's status text of waiting containers (only changed ones are passed). */
  setStatuses(statuses: Map<string, string>): Promise<void>;
}
