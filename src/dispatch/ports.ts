// What the dispatcher needs from the world, as two small interfaces (like Arvados' queue and pool):
// the container queue with its nodes (PostgreSQL in production, an in-memory queue in the simulator) and
// a cloud Driver (src/cloud/driver.ts). The dispatcher loop itself is the same everywhere.
import type { FailureClass } from '../model/types.js';
import type { WaitingGroup } from './scheduler/statuses.js';
import type { SnapshotContainer } from './scheduler/types.js';

/** A node (an agent on an instance) as the dispatcher sees it. */
export interface NodeView {
  id: string;
  instanceId: string;
  /** registered = recorded, agent not yet arrived; idle/busy/draining/drained; failed. */
  state: 'registered' | 'idle' | 'busy' | 'draining' | 'drained' | 'failed';
  /** Last ping (or registration); null while the agent has not registered. */
  lastPingAt: Date | null;
  /**
   * Its agent said in its last ping that it can claim lent room back (its pressure watcher runs): only
   * such nodes' instances lend to opportunistic containers. Absent: false.
   */
  reclaims?: boolean;
}

/**
 * How long a failed node stays in nodes(): long enough for the dispatcher to see it failed and shut its
 * instance down, short enough that the list holds only recent failures. Measured on the application clock.
 */
export const FAILED_NODE_VISIBLE_MS = 3_600_000;

/** The result of one item of a batched transition: one refused item never fails the others. */
export type ItemOutcome = { id: string; ok: true } | { id: string; ok: false; reason: string };

/** A Locked container to place on an instance (and its node, null while none registered). */
export interface AssignItem {
  id: string;
  instance: string;
  node: string | null;
}

/** A Locked container to give back to the queue, and why. */
export interface UnlockItem {
  id: string;
  reason: string;
}

/** A container to cancel, with the failure class that decides its retry (DESIGN §3.3). */
export interface CancelItem {
  id: string;
  failureClass: FailureClass;
  reason: string;
  /** false: no retry can succeed, so the request ends now (src/model/retry.ts). Default true. */
  retryable?: boolean;
  /** An opportunistic container taken off its instance: retried at once, counting no failure. */
  reclaimed?: boolean;
}

/** The scheduler's status texts of waiting containers, by container id (SEAMS §3: h-sched's to reshape). */
export type StatusUpdate = Map<string, string>;

/**
 * Where a dispatcher's container view stands (SEAMS §2): handed back to changes() unread. `position` is
 * the implementation's own (a transaction id for PostgreSQL, a change counter in the simulator); `now` is
 * the clock of the read that made it.
 */
export interface ChangeCursor {
  readonly position: string;
  readonly now: Date;
}

/** A waiting group as stored: in a slot of its dispatcher, reused across passes (migration 060). */
export type StoredGroup = WaitingGroup & { slot: number };

/** What changed in the containers a dispatcher considers since a cursor (SEAMS §2). */
export interface ContainerChanges {
  /** The cursor for the next call. */
  cursor: ChangeCursor;
  /** Containers to add or replace in the view: as containers() would list them now. */
  upserts: SnapshotContainer[];
  /** Containers to drop from the view (no longer considered); ids the view does not hold may appear. */
  removed: string[];
  /** The earliest run_after still in the future among Queued containers (priority > 0): wake up then. */
  nextRunAfter: Date | null;
}

/**
 * What changed in the nodes of a cluster/tag since a cursor, and which are silent (a pass walks what
 * changed, not every node). A ping alone is no change: a node's lastPingAt in `upserts` is only known to be
 * null (not yet registered) or not; the silent ones carry their real last ping.
 */
export interface NodeChanges {
  /** The cursor for the next call. */
  cursor: ChangeCursor;
  /** true: `upserts` is every node nodes() lists now (the caller drops the rest); false: only changes. */
  full: boolean;
  /** Nodes as nodes() would list them that may have changed (state, instance, registration). */
  upserts: NodeView[];
  /** Nodes nodes() no longer lists; ids the caller does not hold may appear. */
  removed: string[];
  /**
   * With `silentBefore`: the nodes listed, not failed, registered, whose last ping is before it (empty
   * without).
   */
  silent: NodeView[];
}

/** Whether a listed node is silent before `before` (ms): not failed, registered, last ping before it. */
export function isSilent(n: NodeView, before: number): boolean {
  return (
    n.state !== 'failed' &&
    n.state !== 'registered' &&
    n.lastPingAt !== null &&
    n.lastPingAt.getTime() < before
  );
}

/**
 * The queue and node records, for one dispatcher. Every method is one transaction (or one statement) for
 * the whole batch; batched transitions answer per item, in the order of the items. Times that decide
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
  /**
   * The containers() view incrementally: with `since` null, everything containers() lists; otherwise the
   * containers whose state, priority, lock, assignment or run_after changed since the cursor (as upserts
   * while still considered, else removed), and the Queued ones whose run_after passed in (since.now, now].
   * A cursor this queue can no longer answer for is refused with an error: the caller reloads (since null).
   */
  changes(dispatcherId: string, now: Date, since: ChangeCursor | null): Promise<ContainerChanges>;
  /** Queued → Locked; returns the ids actually locked (others were taken or changed meanwhile). */
  lock(ids: string[], dispatcherId: string): Promise<string[]>;
  /**
   * lock() and assign() of the same containers in one step (one statement on PostgreSQL): returns the ids
   * locked, each placed on its item's instance; the others were taken or changed meanwhile and are
   * untouched (the first item of an id wins). Both queues have it, so the simulator runs the act step
   * production runs.
   */
  lockAssign(items: AssignItem[], dispatcherId: string): Promise<string[]>;
  /** Places Locked containers on instances (their nodes, if registered, then start them). */
  assign(items: AssignItem[], dispatcherId: string): Promise<ItemOutcome[]>;
  /** Locked → Queued by the lock holder (or Cancelled perm past max_dispatch_attempts). */
  unlock(items: UnlockItem[], dispatcherId: string): Promise<ItemOutcome[]>;
  /** → Cancelled: containers this dispatcher holds, or Queued ones nobody holds (e.g. unsatisfiable). */
  cancel(items: CancelItem[], dispatcherId: string): Promise<ItemOutcome[]>;
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
   * The nodes() view incrementally (NodeChanges): with `since` null, everything nodes() lists (full);
   * otherwise at least the nodes whose state, instance or registration changed since the cursor, or a full
   * list. A cursor this queue can no longer answer for is refused with an error: the caller reloads.
   */
  nodeChanges(
    cluster: string,
    tag: string,
    now: Date,
    since: ChangeCursor | null,
    silentBefore: Date | null,
  ): Promise<NodeChanges>;
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
  /**
   * Stores the scheduler's status text of containers that do not wait in the queue (only changed ones
   * are passed); a container given a text here no longer points at a waiting group.
   */
  setStatuses(statuses: StatusUpdate): Promise<void>;
  /**
   * Stores the statuses of waiting containers by reason (SEAMS §3): upserts `groups` (the changed ones,
   * by slot; their members then point at them) and deletes this dispatcher's groups whose slot is not in
   * `slots` (every current one). A group of 10k containers is one row.
   */
  setWaiting(dispatcherId: string, groups: StoredGroup[], slots: number[]): Promise<void>;
}
