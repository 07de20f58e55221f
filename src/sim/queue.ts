// The simulator's queue: an in-memory DispatchQueue with the store's semantics (DESIGN §3.2–3.4), so the
// real Dispatcher runs unchanged against it. The rules are not re-implemented here: who may make which
// transition and what a requeue does past max_dispatch_attempts come from src/model/transitions.ts
// (refusal, requeueDecision), what a request does when its container ends from src/model/retry.ts
// (decideRetry, retryRunAfter): the same code the store's transitions (src/store/transitions/) use.
// test/contract/ runs the same cases against both queues.
//
// | from    | to        | who (here)                                                     |
// |---------|-----------|----------------------------------------------------------------|
// | Queued  | Locked    | lock() or lockAssign() (placed too, on a node that takes work): priority > 0 and run_after passed; lock_count += 1 |
// | Locked  | Locked    | assign() by the holder, on a node that takes work (known, not failed) |
// | Locked  | Queued    | unlock() by the holder, failNode(), release() or a lost dispatcher; the max_dispatch_attempts-th requeue cancels perm |
// | Locked  | Running   | start() by the agent of the assigned node with the current lock generation; not from a failed node |
// | Running | Complete  | complete() by that agent                                       |
// | any     | Cancelled | cancel() (holder, or a Queued one nobody holds), failNode() for Running (temp) |
//
// Cost: every operation is O(1) on maps (plus the caller's ids); containers() walks only the non-final
// containers, never the history.
import type { Rng } from '../model/clock.js';
import { decideRetry, grownRam, reclaimedReason, retryRunAfter, type ContainerEnd } from '../model/retry.js';
import { REQUEST_DEFAULTS } from '../model/request.js';
import {
  nodeRefusal,
  REASONS,
  refusal,
  requeueDecision,
  type Actor,
  type ContainerFacts,
  type NodeFacts,
  type Refusal,
  type TransitionKind,
} from '../model/transitions.js';
import type { ContainerState, FailureClass } from '../model/types.js';
import type {
  AssignItem,
  CancelItem,
  ChangeCursor,
  ContainerChanges,
  DispatchQueue,
  ItemOutcome,
  NodeChanges,
  NodeView,
  StatusUpdate,
  StoredGroup,
  UnlockItem,
} from '../dispatch/ports.js';
import { queuedText, type WaitingGroup } from '../dispatch/scheduler/statuses.js';
import type { SnapshotContainer } from '../dispatch/scheduler/types.js';
import { ConflictError, ForbiddenError, NotFoundError, refusalError } from '../store/errors.js';
import { firstOfEach } from '../store/transitions/outcome.js';
import { SimNodes } from './nodes.js';

/** The owner of every simulated request (the store's owner column; the simulator has one user). */
const SIM_OWNER = 'sim';

/** What a simulated request carries besides its resources: how long it runs and how it exits. */
export interface SimRequestSpec {
  id: string;
  vcpus: number;
  ram: number;
  scratch: number;
  gpus: number;
  preemptible: boolean;
  /** May be placed into reserved but unused capacity (issue 16); default false. */
  opportunistic?: boolean;
  /** After an OOM kill the retry asks for ram × this (grownRam); default null: the same ram. */
  ramRetryFactor?: number | null;
  /** What it uses while it runs, as its agent would sample it (the trace's usage); absent: not measured. */
  use?: { vcpus: number; ram: number };
  /** A guaranteed job that grows to its whole request this long after it started (src/sim/opportunistic.ts). */
  growAtMs?: number | null;
  priority: number;
  durationMs: number;
  exitCode: number;
  /** Who submitted it (per-user limits, fair sharing); '' when unknown. */
  owner?: string;
  /** The request's name (run-time history by step: src/dispatch/run-history.ts); absent: none. */
  name?: string;
  /** The run time its submitter expects, ms (end_aligned: the SWF requested time); absent: none. */
  expectedRunMs?: number;
  /** "Do not start before" (virtual ms), as an API request's run_after. */
  runAfter?: number;
  /** Retry policy (DESIGN §3.3); defaults as for an API request. */
  containerCountMax?: number;
  maxTempRetries?: number;
  retryOnFailure?: boolean;
}

interface SimRequest {
  spec: SimRequestSpec;
  attempts: number;
  tempFailures: number;
  /** Attempts ended by a spot interruption (the scheduler's on_demand_after_interruptions). */
  interruptions: number;
  final: boolean;
  /** Work kept across reclaims by checkpoints (SimQueueOptions.resume), ms. */
  doneMs: number;
  /** How it ended, once final. */
  outcome: 'success' | 'failed' | 'cancelled' | null;
  current: string;
}

/** How many requests ended each way, and how many are not final yet. */
export interface RequestOutcomes {
  success: number;
  failed: number;
  cancelled: number;
  open: number;
}

/** One container (attempt) in the simulated queue. */
export interface SimContainer {
  id: string;
  request: SimRequest;
  attempt: number;
  state: ContainerState;
  /** The ram this attempt asks for: the request's, or more after an OOM kill (grownRam). */
  ram: number;
  /** When it started running (virtual ms), null before. */
  startedAt: number | null;
  /** It grew to its whole request (src/sim/opportunistic.ts): its use is its request from then on. */
  grown: boolean;
  queuedAt: number;
  runAfter: number | null;
  lockedBy: string | null;
  /** Bumped on every lock, unlock and cancel: the per-lock token of the store. */
  generation: number;
  lockCount: number;
  instance: string | null;
  node: string | null;
  /** Why it was cancelled, once it was (the store's failure_class and runtime_status). */
  failureClass: FailureClass | null;
  reason: string | null;
  /** The scheduler's last status text while it did not wait in the queue. */
  status: string | null;
  /** Its waiting group and its place in it, while the scheduler's last statuses list it (setWaiting). */
  waiting: { g: { group: WaitingGroup; gone: boolean }; index: number } | null;
  /** Cached snapshot view; null after any change. */
  view: SnapshotContainer | null;
}

/** Things the agents and the run's recorder react to. Every callback is optional. */
export interface QueueObserver {
  /** A container was created (a submission or a retry). */
  created?(c: SimContainer): void;
  /** A Locked container was placed on a node: its agent should start it. */
  assigned?(nodeId: string, c: SimContainer): void;
  started?(c: SimContainer): void;
  /** A container reached Complete or Cancelled; `wasRunning` when it had started. */
  ended?(c: SimContainer, wasRunning: boolean): void;
  /** A request became final (no more attempts): how it ended. */
  requestFinal?(spec: SimRequestSpec, outcome: keyof Omit<RequestOutcomes, 'open'>): void;
  /** A retry will become runnable at `at`: the dispatcher should look then. */
  runnableAt?(at: number): void;
  nodeFailed?(nodeId: string): void;
  drain?(nodeId: string): void;
}

export interface SimQueueOptions {
  now(): number;
  rng: Rng;
  /** max_dispatch_attempts (DESIGN §3.3): the simulator's scheduler section's. */
  maxDispatchAttempts: number;
  /** The most ram an offered instance type holds: caps an OOM-killed retry's growth (grownRam). */
  largestRam?: number | null;
  observer?: QueueObserver;
  /**
   * A reclaimed container resumes from its checkpoint: its retry runs what is left plus `moveMs` (the
   * simulator's opportunistic.resume); absent: it starts over.
   */
  resume?: { moveMs: number } | null;
}

/** The in-memory DispatchQueue of the simulator. */
export class SimQueue implements DispatchQueue {
  private readonly byId = new Map<string, SimContainer>();
  /** Non-final containers, in creation order. */
  private readonly active = new Map<string, SimContainer>();
  private readonly nodeTable: SimNodes;
  private readonly leases = new Map<string, { cluster: string; tag: string; at: number }>();
  private readonly outcomeCounts: RequestOutcomes = { success: 0, failed: 0, cancelled: 0, open: 0 };
  private readonly maxAttempts: number;
  private readonly observer: QueueObserver;
  /**
   * Ids of changed containers in the order of their changes (for changes()): entry i is change number
   * changes0 + i + 1. Trimmed to what the dispatchers' last cursors still need.
   */
  private changeLog: string[] = [];
  private changes0 = 0;
  /** Each dispatcher's last cursor. */
  private readonly cursors = new Map<string, { position: number; now: number }>();
  /** Each dispatcher's waiting groups by reason (setWaiting). */
  private readonly waitingGroups = new Map<string, Map<number, { group: WaitingGroup; gone: boolean }>>();
  /** Queued containers with a run_after (retry backoff): they become runnable without a change. */
  private readonly delayed = new Map<string, SimContainer>();

  constructor(private readonly o: SimQueueOptions) {
    this.maxAttempts = o.maxDispatchAttempts;
    this.observer = o.observer ?? {};
    this.nodeTable = new SimNodes(o.now);
  }

  /** Non-final containers (Queued, Locked, Running). */
  get activeCount(): number {
    return this.active.size;
  }

  /** Requests by outcome (DESIGN §3.3). */
  outcomes(): RequestOutcomes {
    return { ...this.outcomeCounts };
  }

  get(id: string): SimContainer {
    const c = this.byId.get(id);
    if (c === undefined) throw new NotFoundError(`container ${id} not found`);
    return c;
  }

  /** Submits a request: its first container is Queued now. */
  submit(spec: SimRequestSpec): SimContainer {
    const req: SimRequest = {
      spec,
      attempts: 0,
      tempFailures: 0,
      interruptions: 0,
      final: false,
      doneMs: 0,
      outcome: null,
      current: spec.id,
    };
    this.outcomeCounts.open++;
    return this.addContainer(req, spec.id, 1, this.o.now(), spec.runAfter ?? null, spec.ram);
  }

  // --- DispatchQueue -------------------------------------------------------------------------------

  async heartbeat(
    dispatcherId: string,
    cluster: string,
    tag: string,
    now: Date,
    lostAfterMs: number,
  ): Promise<boolean> {
    const t = now.getTime();
    this.leases.set(dispatcherId, { cluster, tag, at: t });
    // Dispatchers of this cluster that stopped beating lose their unplaced locks (DESIGN §3.5).
    for (const [id, l] of this.leases)
      if (id !== dispatcherId && l.cluster === cluster && l.at < t - lostAfterMs)
        this.releaseUnplaced(id, REASONS.dispatcherLost(id));
    return true;
  }

  async release(dispatcherId: string, _now: Date): Promise<void> {
    this.leases.delete(dispatcherId);
    this.cursors.delete(dispatcherId);
    this.releaseUnplaced(dispatcherId, REASONS.released(dispatcherId));
  }

  async containers(dispatcherId: string, now: Date): Promise<SnapshotContainer[]> {
    const t = now.getTime();
    const out: SnapshotContainer[] = [];
    for (const c of this.active.values())
      if (considered(c, dispatcherId, t)) out.push((c.view ??= this.view(c)));
    return out;
  }

  async changes(dispatcherId: string, now: Date, since: ChangeCursor | null): Promise<ContainerChanges> {
    const t = now.getTime();
    const upserts: SnapshotContainer[] = [];
    const removed: string[] = [];
    if (since === null) upserts.push(...(await this.containers(dispatcherId, now)));
    else {
      const from = Number(since.position) - this.changes0;
      if (!(from >= 0 && from <= this.changeLog.length))
        throw new Error(`change cursor ${since.position} is older than this queue keeps: reload the view`);
      const seen = new Set<string>();
      const add = (c: SimContainer) => {
        if (seen.has(c.id)) return;
        seen.add(c.id);
        if (considered(c, dispatcherId, t)) upserts.push((c.view ??= this.view(c)));
        else removed.push(c.id);
      };
      for (let i = from; i < this.changeLog.length; i++) add(this.byId.get(this.changeLog[i]!)!);
      const after = since.now.getTime();
      for (const c of this.delayed.values()) if (c.runAfter! > after && c.runAfter! <= t) add(c);
    }
    const position = this.changes0 + this.changeLog.length;
    this.cursors.set(dispatcherId, { position, now: t });
    this.trimChanges();
    return {
      cursor: { position: String(position), now },
      upserts,
      removed,
      nextRunAfter: this.nextRunAfter(t),
    };
  }

  async lock(ids: string[], dispatcherId: string): Promise<string[]> {
    return ids.filter((id) => this.lockOne(id, dispatcherId));
  }

  /**
   * The store's lockAssign (src/store/transitions/lock.ts): each item's container, when it may be locked
   * now onto a node that takes work, is locked and placed in one step (the lock guard and the node's: the
   * assign guard's holder and state hold by construction; the first item of an id wins); the others are
   * untouched.
   */
  async lockAssign(items: AssignItem[], dispatcherId: string): Promise<string[]> {
    const got: string[] = [];
    for (const it of firstOfEach(items))
      if (!nodeRefusal('assign', it.id, this.nodeFacts(it.node)) && this.lockOne(it.id, dispatcherId)) {
        this.assignOne(it.id, dispatcherId, it.instance, it.node);
        got.push(it.id);
      }
    return got;
  }

  /** Queued → Locked when the shared rules allow it; whether it was locked. */
  private lockOne(id: string, dispatcherId: string): boolean {
    if (this.refused('lock', id, { kind: 'dispatcher', id: dispatcherId })) return false;
    const c = this.byId.get(id)!;
    c.state = 'Locked';
    this.touch(c);
    c.lockedBy = dispatcherId;
    c.generation++;
    c.lockCount++;
    return true;
  }

  async maxDispatchAttempts(): Promise<number> {
    return this.maxAttempts;
  }

  async unlock(items: UnlockItem[], dispatcherId: string): Promise<ItemOutcome[]> {
    return items.map((it) => outcome(it.id, () => this.unlockOne(it.id, dispatcherId, it.reason)));
  }

  async assign(items: AssignItem[], dispatcherId: string): Promise<ItemOutcome[]> {
    return items.map((it) => outcome(it.id, () => this.assignOne(it.id, dispatcherId, it.instance, it.node)));
  }

  async cancel(items: CancelItem[], dispatcherId: string): Promise<ItemOutcome[]> {
    return items.map((it) =>
      outcome(it.id, () =>
        this.cancelOne(it.id, dispatcherId, it.failureClass, it.reason, it.retryable ?? true, it.reclaimed),
      ),
    );
  }

  private unlockOne(id: string, dispatcherId: string, reason: string): void {
    this.requeue(this.check('requeue', id, { kind: 'dispatcher', id: dispatcherId }), reason);
  }

  private assignOne(id: string, dispatcherId: string, instanceId: string, nodeId: string | null): void {
    const c = this.check('assign', id, { kind: 'dispatcher', id: dispatcherId }, nodeId);
    this.detach(c);
    c.instance = instanceId;
    this.touch(c);
    c.node = nodeId;
    const node = nodeId === null ? undefined : this.nodeTable.get(nodeId);
    if (node !== undefined) {
      node.assigned.add(id);
      this.nodeTable.touch(node);
      // Like the store's pg_notify: a registered agent hears about new work at once (the node is not
      // failed: the assign guard saw to that).
      if (node.registeredAt !== null) this.observer.assigned?.(node.id, c);
    }
  }

  private cancelOne(
    id: string,
    dispatcherId: string,
    failureClass: FailureClass,
    reason: string,
    retryable: boolean,
    reclaimed = false,
  ): void {
    const c = this.check('cancel', id, { kind: 'dispatcher', id: dispatcherId });
    this.finish(c, { state: 'Cancelled', exitCode: null, failureClass, reason, retryable, reclaimed });
  }

  async createNode(
    _instanceType: string,
    cluster: string,
    tag: string,
  ): Promise<{ nodeId: string; bootstrapSecret: string }> {
    return this.nodeTable.create(cluster, tag);
  }

  async bindNode(nodeId: string, instanceId: string): Promise<void> {
    const n = this.nodeTable.find(nodeId);
    n.instanceId = instanceId;
    this.nodeTable.touch(n);
  }

  async nodes(cluster: string, tag: string, now: Date): Promise<NodeView[]> {
    return this.nodeTable.list(cluster, tag, now.getTime());
  }

  async nodeChanges(
    cluster: string,
    tag: string,
    now: Date,
    since: ChangeCursor | null,
    silentBefore: Date | null,
  ): Promise<NodeChanges> {
    return this.nodeTable.changes(cluster, tag, now.getTime(), since, silentBefore?.getTime() ?? null);
  }

  async failNode(nodeId: string, reason: string): Promise<void> {
    // As the store: failing an unknown or already failed node changes nothing.
    const n = this.nodeTable.get(nodeId);
    if (n === undefined || !this.nodeTable.fail(n)) return;
    for (const id of [...n.assigned]) {
      const c = this.byId.get(id)!;
      if (c.state === 'Locked') this.requeue(c, REASONS.nodeFailedRequeue(nodeId, reason));
      else if (c.state === 'Running')
        this.finish(c, {
          state: 'Cancelled',
          exitCode: null,
          failureClass: 'temp',
          reason: REASONS.nodeFailedCancel(nodeId, reason),
          retryable: true,
        });
    }
    this.observer.nodeFailed?.(nodeId);
  }

  async drainNode(nodeId: string): Promise<void> {
    const n = this.nodeTable.find(nodeId);
    if (n.state !== 'idle' && n.state !== 'busy') return;
    n.state = 'draining';
    this.nodeTable.touch(n);
    this.observer.drain?.(nodeId);
  }

  // --- the agent's side ----------------------------------------------------------------------------

  /**
   * The agent registers with its bootstrap secret (once) and pings every pingIntervalMs from now on;
   * `reclaims`: it can claim lent room back (a real agent's ping says so when its pressure watcher runs).
   */
  registerNode(nodeId: string, secret: string, pingIntervalMs: number, reclaims: boolean): void {
    this.nodeTable.register(nodeId, secret, pingIntervalMs, reclaims);
  }

  /**
   * The cloud reclaimed the spot instance these containers were running on: their requests count one
   * interruption more (the scheduler's on_demand_after_interruptions reads it; retries carry it forward).
   */
  interrupted(containers: SimContainer[]): void {
    for (const c of containers) c.request.interruptions++;
  }

  /** The agent stopped pinging (it crashed, or its machine went away). */
  stopPings(nodeId: string): void {
    this.nodeTable.stopPings(nodeId);
  }

  /** Containers assigned to the node and not yet started (the store's workFor). */
  workFor(nodeId: string): SimContainer[] {
    const n = this.nodeTable.get(nodeId);
    if (n === undefined || n.state === 'failed') return [];
    const out: SimContainer[] = [];
    for (const id of n.assigned) {
      const c = this.byId.get(id)!;
      if (c.state === 'Locked') out.push(c);
    }
    return out;
  }

  /** Whether the node may start work (not failed, not draining). */
  nodeAccepts(nodeId: string): boolean {
    return this.nodeTable.accepts(nodeId);
  }

  /** Locked → Running by the node's agent holding lock generation `gen`. */
  start(id: string, nodeId: string, gen: number): void {
    const c = this.check('start', id, { kind: 'agent', node: nodeId, generation: gen }, nodeId);
    c.state = 'Running';
    c.startedAt = this.o.now();
    this.touch(c);
    const n = this.nodeTable.get(nodeId)!;
    n.running++;
    this.nodeTable.touch(n);
    this.observer.started?.(c);
  }

  /** Running → Complete with an exit code, reported by the node's agent. */
  complete(id: string, nodeId: string, gen: number, exitCode: number, oomKilled = false): void {
    const c = this.check('complete', id, { kind: 'agent', node: nodeId, generation: gen });
    this.finish(c, {
      state: 'Complete',
      exitCode,
      oomKilled,
      failureClass: null,
      reason: null,
      retryable: true,
    });
  }

  /** A change the scheduler cares about: the cached view is stale and changes() reports it. */
  private touch(c: SimContainer): void {
    c.view = null;
    // Nobody reads changes (no cursor handed out): count the change, keep nothing.
    if (this.cursors.size === 0) this.changes0++;
    else this.changeLog.push(c.id);
    if (c.state === 'Queued' && c.runAfter !== null) this.delayed.set(c.id, c);
    else this.delayed.delete(c.id);
  }

  /** Drops the change log's entries every dispatcher has read (in halves, so the cost is amortised). */
  private trimChanges(): void {
    let oldest = Infinity;
    for (const c of this.cursors.values()) oldest = Math.min(oldest, c.position);
    const keep = oldest - this.changes0;
    if (keep > 1024 && keep * 2 > this.changeLog.length) {
      this.changeLog = this.changeLog.slice(keep);
      this.changes0 += keep;
    }
  }

  /**
   * The earliest future run_after. Passed ones are forgotten once every dispatcher's cursor is past them
   * (no later changes() window can hold them).
   */
  private nextRunAfter(t: number): Date | null {
    let read = Infinity;
    for (const c of this.cursors.values()) read = Math.min(read, c.now);
    let next: number | null = null;
    for (const c of this.delayed.values()) {
      const at = c.runAfter!;
      if (at > t) {
        if (c.request.spec.priority > 0 && (next === null || at < next)) next = at;
      } else if (at <= read) this.delayed.delete(c.id);
    }
    return next === null ? null : new Date(next);
  }

  /**
   * The scheduler's view of a container. Cached until the container changes: a long queue is listed on
   * every pass, and rebuilding thousands of objects (and Dates) each time dominated overloaded runs.
   * The dispatcher and plan() only read snapshots.
   */
  private view(c: SimContainer): SnapshotContainer {
    const s = c.request.spec;
    return {
      id: c.id,
      state: c.state,
      priority: s.priority,
      queuedAt: new Date(c.queuedAt),
      vcpus: s.vcpus,
      ram: c.ram,
      scratch: s.scratch,
      gpus: s.gpus,
      preemptible: s.preemptible,
      instanceTypes: null,
      instance: c.state === 'Queued' ? null : c.instance,
      lockCount: c.lockCount,
      owner: s.owner ?? '',
      spotInterruptions: c.request.interruptions,
      ...(s.opportunistic ? { opportunistic: true } : {}),
      ...this.measured(c),
      ...(s.name === undefined ? {} : { name: s.name }),
      ...(s.expectedRunMs === undefined ? {} : { expectedRunMs: s.expectedRunMs }),
      ...(c.state === 'Running' && c.startedAt !== null ? { startedAt: new Date(c.startedAt) } : {}),
    };
  }

  /**
   * A running container's usage as its agent samples it: the trace's use (its whole request once it grew),
   * measured since it started. The view is rebuilt when the agent's sample changes (sampled()).
   */
  private measured(c: SimContainer): { usage?: SnapshotContainer['usage'] } {
    const use = c.request.spec.use;
    if (c.state !== 'Running' || c.startedAt === null || use === undefined) return {};
    const now = this.o.now();
    const u = c.grown ? { vcpus: c.request.spec.vcpus, ram: c.ram } : use;
    return { usage: { ram: u.ram, vcpus: u.vcpus, observedMs: now - c.startedAt } };
  }

  /** The agent's usage sample of a running container changed: the scheduler sees it anew. */
  sampled(id: string): void {
    const c = this.byId.get(id);
    if (c !== undefined && c.state === 'Running') this.touch(c);
  }

  /**
   * The agent froze an opportunistic container a guaranteed one claimed capacity from, and gives it back:
   * the real agent's report (src/agent/runner.ts, reclaim): Cancelled temp and reclaimed, with its reason
   * (reclaimedReason), so decideRetry retries it at once, spending neither an attempt nor a temp retry,
   * and it resumes from its checkpoint (SimQueueOptions.resume) as a vacated one does.
   */
  requeueFrozen(id: string, nodeId: string, gen: number, why: string): void {
    const c = this.check('cancel', id, { kind: 'agent', node: nodeId, generation: gen });
    this.finish(c, {
      state: 'Cancelled',
      exitCode: null,
      failureClass: 'temp',
      reason: reclaimedReason(why),
      retryable: true,
      reclaimed: true,
    });
  }

  /** The container's facts for the shared rules (src/model/transitions.ts). */
  private facts(c: SimContainer): ContainerFacts {
    return {
      id: c.id,
      state: c.state,
      lockedBy: c.lockedBy,
      nodeId: c.node,
      instanceId: c.instance,
      generation: c.generation,
      lockCount: c.lockCount,
      owner: SIM_OWNER,
      priority: c.request.spec.priority,
      runAfter: c.runAfter,
    };
  }

  /** The facts of the node a transition targets (null: none named), for the shared rules. */
  private nodeFacts(nodeId: string | null): NodeFacts | null {
    return nodeId === null ? null : { id: nodeId, state: this.nodeTable.get(nodeId)?.state ?? null };
  }

  /** Why `actor` may not make the transition (the shared rules; `nodeId`: the node it targets), or null. */
  private refused(
    kind: TransitionKind,
    id: string,
    actor: Actor,
    nodeId: string | null = null,
  ): Refusal | null {
    const c = this.byId.get(id);
    const facts = c === undefined ? undefined : this.facts(c);
    return refusal(kind, id, facts, actor, this.o.now(), this.nodeFacts(nodeId));
  }

  /** The container, when `actor` may make the transition; else its refusal, thrown as the store does. */
  private check(kind: TransitionKind, id: string, actor: Actor, nodeId: string | null = null): SimContainer {
    const r = this.refused(kind, id, actor, nodeId);
    if (r) throw refusalError(r);
    return this.byId.get(id)!;
  }

  /** Locked → Queued, or Cancelled (perm) past max_dispatch_attempts: the store's requeueDecision. */
  private requeue(c: SimContainer, why: string): void {
    const d = requeueDecision(c.lockCount, this.maxAttempts, why);
    if (d.kind === 'requeue') this.toQueued(c);
    else
      this.finish(c, {
        state: 'Cancelled',
        exitCode: null,
        failureClass: d.failureClass,
        reason: d.reason,
        retryable: true,
      });
  }

  private detach(c: SimContainer): void {
    if (c.node === null) return;
    const n = this.nodeTable.get(c.node);
    if (n !== undefined) {
      n.assigned.delete(c.id);
      if (c.state === 'Running') n.running--;
      this.nodeTable.touch(n);
    }
  }

  private releaseUnplaced(dispatcherId: string, why: string): void {
    for (const c of [...this.active.values()])
      if (c.state === 'Locked' && c.lockedBy === dispatcherId && c.instance === null) this.requeue(c, why);
  }

  /** Stores the scheduler's status text (`berth why`); kept on the container as the store does. */
  async setStatuses(statuses: StatusUpdate): Promise<void> {
    for (const [id, s] of statuses) {
      const c = this.byId.get(id);
      if (c === undefined) continue;
      c.status = s;
      c.waiting = null;
    }
  }

  /** Statuses by group, as the store keeps them (migration 060): each member points at its group. */
  async setWaiting(dispatcherId: string, groups: StoredGroup[], slots: number[]): Promise<void> {
    let mine = this.waitingGroups.get(dispatcherId);
    if (mine === undefined) this.waitingGroups.set(dispatcherId, (mine = new Map()));
    const keep = new Set(slots);
    for (const [slot, g] of mine)
      if (!keep.has(slot)) {
        g.gone = true;
        mine.delete(slot);
      }
    for (const group of groups) {
      const old = mine.get(group.slot);
      if (old !== undefined) old.gone = true;
      const g = { group, gone: false };
      mine.set(group.slot, g);
      group.members.forEach((id, index) => {
        const c = this.byId.get(id);
        if (c !== undefined) c.waiting = { g, index };
      });
    }
  }

  /** A container's status text as `berth why` would show it (the store's withStatusText). */
  statusText(id: string): string | null {
    const c = this.get(id);
    const w = c.waiting;
    if (w === null || w.g.gone) return c.status;
    const { group } = w.g;
    return queuedText(group.positions[w.index]!, group.higherAhead[w.index]!, group.reason);
  }

  private toQueued(c: SimContainer): void {
    this.detach(c);
    c.state = 'Queued';
    this.touch(c);
    c.lockedBy = null;
    c.generation++;
    c.instance = null;
    c.node = null;
  }

  private addContainer(
    req: SimRequest,
    id: string,
    attempt: number,
    queuedAt: number,
    runAfter: number | null,
    ram: number,
  ): SimContainer {
    if (this.byId.has(id)) throw new ConflictError(`container ${id} already exists`);
    const c: SimContainer = {
      id,
      request: req,
      attempt,
      state: 'Queued',
      ram,
      startedAt: null,
      grown: false,
      queuedAt,
      runAfter,
      lockedBy: null,
      generation: 0,
      lockCount: 0,
      instance: null,
      node: null,
      failureClass: null,
      reason: null,
      status: null,
      waiting: null,
      view: null,
    };
    this.byId.set(id, c);
    this.active.set(id, c);
    this.touch(c);
    req.current = id;
    this.observer.created?.(c);
    if (runAfter !== null) this.observer.runnableAt?.(runAfter);
    return c;
  }

  /** How long the container runs: its request's duration, less what earlier attempts kept (resume). */
  runMs(c: SimContainer): number {
    const kept = c.request.doneMs;
    return kept === 0 ? c.request.spec.durationMs : c.request.spec.durationMs - kept + this.o.resume!.moveMs;
  }

  /** Ends a container and lets its request decide (src/store/finish.ts, with the same decideRetry). */
  private finish(c: SimContainer, end: ContainerEnd): void {
    const wasRunning = c.state === 'Running';
    const resume = this.o.resume;
    if (resume && end.reclaimed === true && wasRunning && c.startedAt !== null) {
      const req = c.request;
      const ran = this.o.now() - c.startedAt - (req.doneMs > 0 ? resume.moveMs : 0);
      req.doneMs = Math.min(req.spec.durationMs - 1, req.doneMs + Math.max(0, ran));
    }
    this.detach(c);
    c.state = end.state;
    c.failureClass = end.failureClass;
    c.reason = end.reason;
    this.touch(c);
    // A cancel revokes the per-lock token; after a completion the agent may still ship its last logs.
    if (end.state === 'Cancelled') c.generation++;
    this.active.delete(c.id);
    this.observer.ended?.(c, wasRunning);
    const req = c.request;
    if (req.final || req.current !== c.id) return;
    const s = req.spec;
    const d = decideRetry(
      end,
      {
        priority: s.priority,
        attempts: req.attempts,
        tempFailures: req.tempFailures,
        containerCountMax: s.containerCountMax ?? REQUEST_DEFAULTS.containerCountMax,
        maxTempRetries: s.maxTempRetries ?? REQUEST_DEFAULTS.maxTempRetries,
        retryOnFailure: s.retryOnFailure ?? REQUEST_DEFAULTS.retryOnFailure,
      },
      this.o.rng,
    );
    req.attempts = d.attempts;
    req.tempFailures = d.tempFailures;
    if (d.kind === 'final') {
      req.final = true;
      req.outcome = d.outcome;
      this.outcomeCounts.open--;
      this.outcomeCounts[d.outcome]++;
      this.observer.requestFinal?.(s, d.outcome);
      return;
    }
    const now = this.o.now();
    // The retry keeps the original queue time (as the store does), so it does not lose its place; after an
    // OOM kill it may ask for more ram (the store's rule: grownRam).
    const grown = grownRam(end, c.ram, s.ramRetryFactor ?? null, this.o.largestRam ?? null);
    this.addContainer(
      req,
      `${s.id}#${c.attempt + 1}`,
      c.attempt + 1,
      c.queuedAt,
      retryRunAfter(now, d.delayMs, s.runAfter ?? null),
      grown ?? c.ram,
    );
  }
}

/** Whether a dispatcher's view holds the container (the store's containers() predicate). */
function considered(c: SimContainer, dispatcherId: string, t: number): boolean {
  if (c.state === 'Queued') return c.request.spec.priority > 0 && (c.runAfter === null || c.runAfter <= t);
  return (c.state === 'Locked' || c.state === 'Running') && c.lockedBy === dispatcherId;
}

/** One item's outcome: refused (ok: false, with the reason) when `fn` throws the store's refusal errors. */
function outcome(id: string, fn: () => void): ItemOutcome {
  try {
    fn();
    return { id, ok: true };
  } catch (err) {
    if (err instanceof ConflictError || err instanceof NotFoundError || err instanceof ForbiddenError)
      return { id, ok: false, reason: err.message };
    throw err;
  }
}
