// The dispatcher (DESIGN §6.1): snapshot → plan → act, and the periodic sync with the cloud's list.
// Everything it knows is rebuilt from the queue and the cloud on start, so it can be killed at any time.
// The same code runs in `berth dispatch`, in `berth up` and in the simulator.
import type { Driver, Tags } from '../cloud/driver.js';
import { NotFoundError as CloudNotFound, RateLimitError } from '../cloud/errors.js';
import { longTimers, nodeTimers, type Clock, type Timers } from '../model/clock.js';
import {
  isEndingInstanceState,
  type FailureClass,
  type IdleBehavior,
  type InstanceState,
  type InstanceType,
} from '../model/types.js';
import { CloudMemory } from './cloud-memory.js';
import { ContainerView } from './container-view.js';
import { RunHistory } from './run-history.js';
import type { DispatcherTimers } from './config.js';
import { NodeWatch } from './node-watch.js';
import { NodeViews, type NodeRead } from './node-view.js';
import {
  adopt,
  IllegalInstanceTransition,
  instanceTags,
  setState,
  stateFromNode,
  STRICT_STATES,
  TAG,
  type PoolInstance,
} from './pool.js';
import type { AssignItem, DispatchQueue, ItemOutcome } from './ports.js';
import { OrderedIds } from './ordered-ids.js';
import { StatusWriter } from './status-writer.js';
import { learnsRunTimes } from './scheduler/durations.js';
import type { KeptPool } from './scheduler/kept-pool.js';
import { IncrementalPlanner, type PlannerStats } from './scheduler/incremental.js';
import { plan as realPlan } from './scheduler/plan.js';
import type {
  Action,
  CloudState,
  Plan,
  SchedulerConfig,
  Snapshot,
  SnapshotContainer,
  SnapshotInstance,
} from './scheduler/types.js';

/** How long shutdownAll keeps retrying destroys a rate limit refused (real time: the process is stopping). */
const SHUTDOWN_ALL_RETRY_MS = 60_000;
/** Rounds in a row that destroy nothing before shutdownAll gives up (the next start destroys the rest). */
const SHUTDOWN_ALL_IDLE_ROUNDS = 6;
/**
 * What happened, for metrics, logs, the event stream and simulation reports: every action the dispatcher
 * takes, and every one it fails to take (`error`, with the ids it concerned and the error's class).
 */
export type DispatchEvent =
  | { kind: 'instance-created'; at: Date; instance: string; type: string; price: number; for: string[] }
  | { kind: 'instance-ready'; at: Date; instance: string }
  | { kind: 'instance-shutdown'; at: Date; instance: string; reason: string }
  /** The driver accepted a destroy (the instance is gone once the cloud's list no longer shows it). */
  | { kind: 'instance-destroyed'; at: Date; instance: string; type: string }
  | { kind: 'instance-gone'; at: Date; instance: string }
  /** The cloud announced it will reclaim the instance (spot): it is drained. */
  | { kind: 'instance-interrupted'; at: Date; instance: string; noticeAt: Date }
  /** Locks granted, and those another dispatcher (or a state change) took first. */
  | { kind: 'containers-locked'; at: Date; containers: string[]; refused: string[] }
  | { kind: 'container-placed'; at: Date; container: string; instance: string }
  /** A start the plan asked for, not done this pass because the instance cannot take work yet. */
  | { kind: 'start-deferred'; at: Date; container: string; instance: string; reason: string }
  | { kind: 'container-unlocked'; at: Date; container: string; reason: string }
  | { kind: 'container-cancelled'; at: Date; container: string; failureClass: FailureClass; reason: string }
  | { kind: 'node-lost'; at: Date; node: string; instance: string | null; reason: string }
  | { kind: 'create-failed'; at: Date; type: string; message: string; errorClass: string }
  | ({ kind: 'error'; at: Date; op: string; message: string; errorClass: string } & ErrorSubject);

/** Dispatcher.plannerStats: what the incremental planner did over the passes (scheduler/incremental.ts). */
export interface PlannerCounts extends PlannerStats {
  /** Full passes that merged the changed waiting containers into the kept queue order, or sorted them all. */
  queue: { merged: number; sorted: number };
  /** Full passes' pool side (kept-pool.ts counts): groups, pool view, settle. */
  pool: KeptPool['counts'];
}

/** The ids an action concerned, carried by its `error` event. */
export interface ErrorSubject {
  container?: string;
  instance?: string;
  type?: string;
  node?: string;
}

export interface DispatcherOptions extends DispatcherTimers {
  id: string;
  cluster: string;
  tag: string;
  queue: DispatchQueue;
  driver: Driver;
  clock: Clock;
  /** The timer stop() waits stop_grace on, wrapped to take any delay (longTimers); unset: Node's. */
  timers?: Timers;
  instanceTypes: InstanceType[];
  /** The scheduler's config, but max_dispatch_attempts: the queue's (the database owns it). */
  config: Omit<SchedulerConfig, 'maxDispatchAttempts'>;
  /** Passes further apart than this interrupt the node watch (node-watch.ts); unset in the simulator. */
  maxPassGapMs?: number;
  /** Whether the API the agents ping answers (checked every few seconds); unset: not checked. */
  apiHealth?: () => Promise<boolean>;
  /** The boot data handed to a new instance (the agent's API URL, node id and secret). */
  bootData(node: { nodeId: string; bootstrapSecret: string; instanceType: InstanceType }): string;
  /**
   * The scheduling policy: the real plan() unless a baseline replaces it (simulator). It must be a pure
   * function of the snapshot: a pass whose snapshot did not change reuses its last plan.
   */
  planner?: (s: Snapshot) => Plan;
  onEvent?: (e: DispatchEvent) => void;
  /** Operator requests and the published view of instances (the management API); optional. */
  mirror?: InstanceMirror;
  /**
   * The labels the containers an instance is created for agree on, copied to its tags (cloud cost
   * allocation); unset: none.
   */
  labelsFor?: (containers: string[]) => Promise<Tags>;
  /** max_concurrent_creates: creates in flight at once; the rest wait for a later pass. Unset: no bound. */
  maxConcurrentCreates?: number | null;
  /** A create or destroy in flight finished: a pass now would apply its outcome (the loop's wake-up). */
  onOperationDone?: () => void;
}

/** A create in flight: a booting instance with a provisional id to the scheduler, so limits count it. */
interface PendingCreate {
  id: string;
  type: InstanceType;
  startedAt: Date;
  /** The node recorded for it, once createNode returned. */
  nodeId: string | null;
  /** The containers it is created for (the scheduler's share rule `expected` lets them start on it). */
  forContainers: string[];
}

/**
 * The actions of `plan` that place a container on an instance ready for it (`ready`): each start, and the
 * lock of a container it starts (locked and assigned in one queue call). A quick pass carries out these
 * only: every one is an action of the full plan, on an instance where the plan found room.
 */
export function placingActions(plan: Plan, ready: (instance: string) => boolean): Action[] {
  const placing = new Set(
    plan.actions
      .filter((a) => a.op === 'start' && ready(a.instance))
      .map((a) => (a as { container: string }).container),
  );
  return plan.actions.filter((a) => (a.op === 'start' || a.op === 'lock') && placing.has(a.container));
}

/** What a finished background operation changes, applied between passes. */
type Outcome = (at: Date) => void;

/** What a pass knew about its limits: the instance types, the scheduler's caps, the cloud's errors. */
export interface DispatcherView {
  instanceTypes: InstanceType[];
  config: SchedulerConfig;
  cloud: CloudState;
}

/** The management API's window on the pool: publish the view, receive hold/drain/run/kill requests. */
export interface InstanceMirror {
  publish(instances: PoolInstance[], now: Date, view?: DispatcherView): Promise<void>;
  requests(): Promise<{ instance: string; idleBehavior: IdleBehavior | null; kill: boolean }[]>;
}

export class LeaseLostError extends Error {}

/** The queue refused one item of a batched transition (it changed meanwhile, or is not this dispatcher's). */
export class QueueRefusal extends Error {}

/** The ids a planned action concerns. */
function actionSubject(a: Action, instances: Map<string, PoolInstance>): ErrorSubject {
  const typeOf = (id: string) => instances.get(id)?.type;
  switch (a.op) {
    case 'lock':
    case 'unlock':
    case 'cancel':
      return { container: a.container };
    case 'start':
    case 'kill':
      return { container: a.container, instance: a.instance, type: typeOf(a.instance) };
    case 'create':
      return { type: a.type };
    case 'shutdown':
      return { instance: a.instance, type: typeOf(a.instance) };
  }
}

export class Dispatcher {
  readonly instances = new Map<string, PoolInstance>();
  private readonly types: Map<string, InstanceType>;
  private readonly cloud: CloudMemory;
  private readonly watch: NodeWatch;
  /** The nodes across passes (node-view.ts). */
  private readonly nodes = new NodeViews();
  /**
   * Instances observe() looks at next (file comment of observe): their containers, their node or their
   * record changed since it last did. The others would come out as they are.
   */
  private readonly dirty = new Set<string>();
  /** Each instance's place in `instances` (observe goes through the dirty ones in that order). */
  private readonly instanceOrder = new OrderedIds();
  /** Instances by the id of their node. */
  private readonly byNode = new Map<string, Set<PoolInstance>>();
  /** Nodes not failed whose instance this dispatcher does not hold (observe fails them once synced). */
  private readonly orphans = new Set<string>();
  private lastSync = -Infinity;
  private synced = false;
  private readonly statusWriter: StatusWriter;
  private stopped = false;
  private running: Promise<void> | null = null;
  /**
   * Creates and destroys run in the background (DESIGN §6.1): a pass starts them and goes on; their
   * outcomes wait in `outcomes` and are applied between passes, so a pass never sees the pool change.
   */
  private readonly ops = new Set<Promise<void>>();
  private readonly outcomes: Outcome[] = [];
  private readonly creating = new Map<string, PendingCreate>();
  /** Instances with a destroy in flight. */
  private readonly destroying = new Set<string>();
  private pendingSeq = 0;
  /** When a destroy was accepted that no list has confirmed yet: the next pass syncs (null: none). */
  private confirmGoneAfter: number | null = null;
  /** Instances the last sync found gone, for the mirror's next publish. */
  private goneUnpublished: PoolInstance[] = [];
  /** Each instance's record in the last snapshot (shown()). */
  private readonly snapshotOf = new WeakMap<PoolInstance, SnapshotInstance>();
  /**
   * The last snapshot's records of the instances not gone, by id, in the order of `instances` (an instance
   * keeps its place when its record is set again): a snapshot lists them without looking at every instance.
   */
  private readonly records = new Map<string, SnapshotInstance>();
  /** Instances whose record may have changed since the last snapshot (reshow): only these are compared again. */
  private readonly reshown = new Set<PoolInstance>();
  /** The last snapshot's list of records (provisional ones aside), while no record changed since. */
  private recordList: SnapshotInstance[] | null = null;
  /** The containers across passes, and their recent arrivals (container-view.ts). */
  private readonly view: ContainerView;
  /** Run and boot times seen so far: the snapshot's estimates (run-history.ts). */
  private readonly history = new RunHistory();
  private readonly planner: IncrementalPlanner;
  /** Instances whose last destroy a rate limit refused, and when it may be tried again (ms). */
  private readonly destroyRefusedUntil = new Map<string, number>();
  /** max_dispatch_attempts as the last full pass read it (null: no full pass yet); quick passes use it. */
  private maxAttempts: number | null = null;
  /** The last plan, for `berth why` and tests. */
  lastPlan: Plan | null = null;

  /**
   * When the next pass could decide something new with no event: the last plan's validUntil, or when a
   * recent arrival leaves the arrival window (ms; Infinity when neither). The simulator wakes then.
   */
  nextDecisionAt(): number {
    let at = this.lastPlan?.validUntil ?? Infinity;
    let idle = false;
    for (const i of this.instances.values()) {
      idle ||= i.state === 'idle';
      // One shutting down counts against the limits until a sync sees it gone; its destroy is retried.
      if (i.state === 'shutdown' || i.state === 'destroy_pending')
        at = Math.min(at, (i.destroyAttemptAt ?? Infinity) + this.o.shutdownRetryMs);
    }
    if (this.confirmGoneAfter !== null) at = Math.min(at, this.confirmGoneAfter + 1);
    // Arrivals only decide which idle instances stay warm.
    return idle ? Math.min(at, this.view.arrivalsChangeAt()) : at;
  }

  /**
   * How many passes planned in full and how many reused the last plan, and of the full ones what they kept
   * from the last pass: the queue order merged or sorted, the pool view reused or built, ...
   * (scheduler/incremental.ts queueCounts, poolCounts).
   */
  get plannerStats(): PlannerCounts {
    return { ...this.planner.stats, queue: this.planner.queueCounts, pool: this.planner.poolCounts };
  }

  constructor(private readonly o: DispatcherOptions) {
    this.types = new Map(o.instanceTypes.map((t) => [t.name, t]));
    this.view = new ContainerView(o.config.arrivalWindowMs);
    this.statusWriter = new StatusWriter(
      o.queue,
      o.id,
      o.statusIntervalMs,
      () => o.clock.now().getTime(),
      (err, at) => this.failed('statuses', err, at, {}),
    );
    this.planner = new IncrementalPlanner(o.planner ?? realPlan);
    this.cloud = new CloudMemory({
      capacityTtlMs: o.capacityTtlMs,
      quotaTtlMs: o.quotaTtlMs,
    });
    this.watch = new NodeWatch({ lostAfterMs: o.nodeLostAfterMs, maxPassGapMs: o.maxPassGapMs });
  }

  private emit(e: DispatchEvent): void {
    this.o.onEvent?.(e);
  }

  /** An action that failed: reported with what it concerned; the next pass tries again. */
  private failed(op: string, err: unknown, now: Date, subject: ErrorSubject): void {
    const e = err instanceof Error ? err : new Error(String(err));
    this.emit({ kind: 'error', at: now, op, message: e.message, errorClass: e.constructor.name, ...subject });
  }

  /**
   * One pass, and the status write it started (status-writer.ts): when it resolves, the store shows the
   * pass's statuses, unless status_interval held them back. Concurrent calls share the pass in flight.
   */
  async tick(): Promise<void> {
    await this.tickAhead();
    await this.statusWriter.flushed();
  }

  /**
   * One pass, whose statuses are written in the background (the service loop's: the next pass need not
   * wait for a long queue's statuses). Concurrent calls share the pass in flight (callers coalesce events
   * into ticks).
   */
  tickAhead(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    this.running ??= this.pass()
      .catch((err: unknown) => {
        this.watch.passFailed();
        throw err;
      })
      .finally(() => (this.running = null));
    return this.running;
  }

  /** Status writes started, for tests and benchmarks (status-writer.ts). */
  get statusWrites(): number {
    return this.statusWriter.writes;
  }

  /**
   * A placing pass (the loop runs one when only finished containers woke it): the containers' changes are
   * read with the lease's heartbeat, and the plan of the snapshot built from them and the instances the
   * last full pass saw places into the freed slots (placingActions: lock and assign in one queue call).
   * Nothing else is read or done: the next full pass, on its normal pacing, carries out the rest. Before
   * any full pass it is a full pass.
   */
  quickTick(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.maxAttempts === null) return this.tick();
    this.running ??= this.quickPass(this.maxAttempts).finally(() => (this.running = null));
    return this.running;
  }

  private async quickPass(maxDispatchAttempts: number): Promise<void> {
    const o = this.o;
    const now = o.clock.now();
    const [held, containers] = await Promise.all([
      o.queue.heartbeat(o.id, o.cluster, o.tag, now, o.dispatcherLostAfterMs),
      this.view.read(o.queue, o.id, now, o.fullReloadPasses),
    ]);
    if (!held) throw new LeaseLostError(`another live dispatcher holds the lease for ${o.id}`);
    this.applyOutcomes(now);
    this.holdContainers();
    const snapshot = this.snapshot(now, containers, maxDispatchAttempts);
    const plan = this.planOf(snapshot);
    await this.act({ ...plan, actions: placingActions(plan, (id) => this.ready(id)) }, now);
  }

  /** Whether an instance takes work now (its agent is there): where placeable() places. */
  private ready(id: string): boolean {
    const inst = this.instances.get(id);
    return !!inst?.nodeId && (inst.state === 'idle' || inst.state === 'running');
  }

  private async pass(): Promise<void> {
    const o = this.o;
    const now = o.clock.now();
    this.watch.passStarted(now.getTime());
    if (!(await o.queue.heartbeat(o.id, o.cluster, o.tag, now, o.dispatcherLostAfterMs))) {
      throw new LeaseLostError(`another live dispatcher holds the lease for ${o.id}`);
    }
    this.applyOutcomes(now);
    // A destroy accepted since the last list is confirmed at once: the instance counts until then.
    if (
      !this.synced ||
      now.getTime() - this.lastSync >= o.syncIntervalMs ||
      (this.confirmGoneAfter !== null && now.getTime() > this.confirmGoneAfter)
    )
      await this.sync(now);
    if (o.mirror) await this.applyOperatorRequests(now);
    if (o.apiHealth && this.watch.probeDue(now.getTime()))
      this.watch.apiProbed(await o.apiHealth().catch(() => false), now.getTime());
    const nodes = await this.nodes.read(o.queue, o.cluster, o.tag, now, this.watch.lostBefore(now.getTime()));
    const containers = await this.view.read(o.queue, o.id, now, o.fullReloadPasses);
    await this.observe(nodes, now);
    this.retryDestroys(now);

    this.maxAttempts = await o.queue.maxDispatchAttempts();
    const snapshot = this.snapshot(now, containers, this.maxAttempts);
    const plan = this.planOf(snapshot);
    await this.act(plan, now);
    this.statusWriter.offer(plan.statuses, now);
    if (o.mirror)
      await o.mirror.publish([...this.instances.values(), ...this.goneUnpublished.splice(0)], now, {
        instanceTypes: o.instanceTypes,
        config: snapshot.config,
        cloud: snapshot.cloud,
      });
  }

  /** What a pass plans from: the instances as this dispatcher holds them, and `containers`. */
  private snapshot(now: Date, containers: SnapshotContainer[], maxDispatchAttempts: number): Snapshot {
    const o = this.o;
    // One walk, no intermediate arrays: this runs every pass over the whole pool.
    const provisional = this.provisional();
    const instances = provisional.length === 0 ? this.shownAll() : [...this.shownAll(), ...provisional];
    return {
      now,
      config: { ...o.config, maxDispatchAttempts },
      instanceTypes: o.instanceTypes,
      instances,
      containers,
      cloud: this.cloud.state(o.instanceTypes, now.getTime()),
      arrivals: this.view.arrivals(now),
    };
  }

  /**
   * The records of the instances not gone, in pool order: the last snapshot's list (the same array) while
   * no instance was touched since (reshow), else that list with the touched instances' records set again
   * (shown). Every change to a field a record holds goes through reshow; under a test runner each pass
   * checks that no record was missed.
   */
  private shownAll(): SnapshotInstance[] {
    if (this.reshown.size > 0) {
      for (const i of this.reshown) {
        // An instance removed from the pool or gone has no record; one added gets its place at the end.
        if (i.state === 'gone' || this.instances.get(i.id) !== i) this.records.delete(i.id);
        else this.records.set(i.id, this.shown(i));
      }
      this.reshown.clear();
      this.recordList = null;
    }
    if (STRICT_STATES) this.checkRecords();
    return (this.recordList ??= [...this.records.values()]);
  }

  /** Marks an instance whose record may have changed (a field that shown() reads, its presence in the pool). */
  private reshow(i: PoolInstance): void {
    this.reshown.add(i);
  }

  /** Throws when a record of `records` is not what shown() gives now (a change that missed reshow): a bug. */
  private checkRecords(): void {
    const want: SnapshotInstance[] = [];
    for (const i of this.instances.values()) if (i.state !== 'gone') want.push(this.shown(i));
    const have = [...this.records.values()];
    if (want.length !== have.length || want.some((r, k) => r !== have[k]))
      throw new Error('dispatcher: a snapshot record missed a change (reshow)');
  }

  /**
   * The snapshot's record of an instance: the one of the last pass while none of its fields changed, so
   * that a pass allocates only for the instances that changed and the planner's comparisons
   * (scheduler/incremental.ts) stop at the reference.
   */
  private shown(i: PoolInstance): SnapshotInstance {
    const k = this.snapshotOf.get(i);
    if (
      k !== undefined &&
      k.type === i.type &&
      k.state === i.state &&
      k.idleBehavior === i.idleBehavior &&
      k.containers === i.containers &&
      k.stateSince === i.stateSince &&
      k.createdAt === i.createdAt &&
      k.createdFor === (i.createdFor || undefined) &&
      k.reclaims === (i.reclaims || undefined)
    )
      return k;
    const made: SnapshotInstance = {
      id: i.id,
      type: i.type,
      state: i.state,
      idleBehavior: i.idleBehavior,
      containers: i.containers,
      stateSince: i.stateSince,
      createdAt: i.createdAt,
      ...(i.createdFor && { createdFor: i.createdFor }),
      ...(i.reclaims && { reclaims: true }),
    };
    this.snapshotOf.set(i, made);
    return made;
  }

  /** The plan of a snapshot, with the run-time and boot estimates of wait_for_running (run-history.ts). */
  private planOf(snapshot: Snapshot): Plan {
    const o = this.o;
    const learn = learnsRunTimes(o.config);
    if (learn) this.history.fill(snapshot, this.view.anyNamed);
    const plan = this.planner.plan(snapshot);
    if (learn) this.history.started(snapshot, plan);
    this.lastPlan = plan;
    return plan;
  }

  /** Reconciles with the cloud's list (DESIGN §6.1 sync). */
  async sync(now: Date): Promise<void> {
    const o = this.o;
    let listed;
    try {
      listed = await o.driver.list({ [TAG.cluster]: o.cluster, [TAG.tag]: o.tag });
    } catch (err) {
      // The pass goes on with the view we have; the sync is tried again at the next pass.
      this.failed('list', err, now, {});
      return;
    }
    const seen = new Set<string>();
    for (const ci of listed) {
      if (ci.state === 'terminated') continue;
      seen.add(ci.id);
      const known = this.instances.get(ci.id);
      if (!known) this.addInstance(adopt(ci, this.types, now));
      else {
        if (ci.interruptionNotice && !known.interruptionNotice && known.idleBehavior !== 'drain') {
          // The cloud will reclaim it: give it no new work, and let it go as soon as it is empty.
          known.idleBehavior = 'drain';
          this.reshow(known);
          this.emit({
            kind: 'instance-interrupted',
            at: now,
            instance: known.id,
            noticeAt: ci.interruptionNotice,
          });
        }
        known.interruptionNotice = ci.interruptionNotice;
      }
    }
    for (const inst of [...this.instances.values()]) {
      // Only what existed before the list was taken can be missing from it.
      if (seen.has(inst.id) || inst.createdAt.getTime() > now.getTime()) continue;
      // One we shut down ourselves is simply gone; any other vanished under us (preempted, killed outside).
      if (inst.nodeId && !isEndingInstanceState(inst.state))
        await this.failNode(inst.nodeId, inst.id, 'its instance disappeared from the cloud', now);
      this.move(inst, 'gone', now);
      this.removeInstance(inst);
      // The mirror writes when its billing ended (its destroy) before the row becomes history.
      if (o.mirror) this.goneUnpublished.push(inst);
      this.cloud.instanceGone();
      this.emit({ kind: 'instance-gone', at: now, instance: inst.id });
    }
    this.synced = true;
    this.lastSync = now.getTime();
    this.confirmGoneAfter = null;
  }

  /** A new instance in the pool: observe() looks at it, and at the nodes bound to it. */
  private addInstance(inst: PoolInstance): void {
    this.instances.set(inst.id, inst);
    this.reshow(inst);
    this.instanceOrder.add(inst.id);
    if (inst.nodeId !== null) {
      let set = this.byNode.get(inst.nodeId);
      if (set === undefined) this.byNode.set(inst.nodeId, (set = new Set()));
      set.add(inst);
    }
    this.dirty.add(inst.id);
    for (const n of this.nodes.boundTo(inst.id)) this.checkOrphan(n);
  }

  private removeInstance(inst: PoolInstance): void {
    this.instances.delete(inst.id);
    this.reshow(inst);
    this.instanceOrder.delete(inst.id);
    if (inst.nodeId !== null) {
      const set = this.byNode.get(inst.nodeId);
      set?.delete(inst);
      if (set?.size === 0) this.byNode.delete(inst.nodeId);
    }
    for (const n of this.nodes.boundTo(inst.id)) this.checkOrphan(n);
  }

  /** Whether node `id` is an orphan: listed, not failed, bound to an instance this dispatcher lacks. */
  private checkOrphan(id: string): void {
    const node = this.nodes.get(id);
    if (node && node.state !== 'failed' && node.instanceId && !this.instances.has(node.instanceId))
      this.orphans.add(id);
    else this.orphans.delete(id);
  }

  /**
   * Updates instance states from nodes and assignments; fails lost nodes. An instance's outcome here
   * depends only on its record, its node (and its silence) and its containers, so only the instances where
   * one of them changed (`dirty`) are looked at, in pool order; the rest would come out as they are.
   */
  private async observe(read: NodeRead, now: Date): Promise<void> {
    this.holdContainers();
    for (const id of read.changed) {
      this.checkOrphan(id);
      for (const inst of this.byNode.get(id) ?? []) this.dirty.add(inst.id);
    }
    for (const id of read.silent.keys())
      for (const inst of this.byNode.get(id) ?? []) this.dirty.add(inst.id);
    const look = this.instanceOrder.inOrder(this.dirty).map((id) => this.instances.get(id)!);
    this.dirty.clear();
    for (const inst of look) {
      if (isEndingInstanceState(inst.state)) continue;
      // Its idle behaviour, reclaims, state or boot time may change below.
      this.reshow(inst);
      const node = inst.nodeId ? this.nodes.get(inst.nodeId) : undefined;
      if (node?.state === 'failed') {
        this.shutdown(inst, 'its node failed', now);
        continue;
      }
      // The silent ones carry their last ping (a ping alone is no change of the kept view).
      const quiet = inst.nodeId ? read.silent.get(inst.nodeId) : undefined;
      if (quiet?.lastPingAt && this.watch.lost(quiet.lastPingAt.getTime(), now.getTime())) {
        const silent = Math.round((now.getTime() - quiet.lastPingAt.getTime()) / 1000);
        await this.failNode(
          quiet.id,
          inst.id,
          `no ping for ${silent}s (node_lost_after ${Math.round(this.o.nodeLostAfterMs / 1000)}s)`,
          now,
        );
        this.shutdown(inst, 'its node was lost', now);
        continue;
      }
      if ((node?.state === 'draining' || node?.state === 'drained') && inst.idleBehavior === 'run') {
        // The agent drains on its own: the cloud announced it will reclaim the instance (a spot
        // interruption) or recommends moving off it. No new work; shut down once empty.
        inst.idleBehavior = 'drain';
        this.emit({ kind: 'instance-interrupted', at: now, instance: inst.id, noticeAt: now });
      }
      // Only an instance whose agent can claim lent room back lends it (opportunistic.ts).
      if (inst.reclaims !== (node?.reclaims === true)) inst.reclaims = node?.reclaims === true;
      const was = inst.state;
      if (
        this.move(inst, stateFromNode(inst, node), now) &&
        (was === 'booting' || was === 'unknown') &&
        inst.state !== 'booting'
      ) {
        this.emit({ kind: 'instance-ready', at: now, instance: inst.id });
      }
      // An adopted instance whose agent never came is judged by its age, like any booting one.
      if (was === 'unknown' && inst.state === 'booting') inst.stateSince = inst.createdAt;
    }
    // A node whose instance the cloud no longer lists can never report again: it died while no dispatcher
    // watched, or the node's failure could not be written when the instance was shut down (database down).
    if (!this.synced) return;
    if (this.orphans.size === 0) return;
    // A create in flight may have bound its node already: its instance is applied between passes.
    const creating = new Set([...this.creating.values()].map((p) => p.nodeId));
    for (const id of this.nodes.inOrder(this.orphans)) {
      const node = this.nodes.get(id)!;
      if (creating.has(node.id)) continue;
      await this.failNode(node.id, node.instanceId, 'its instance is gone', now);
    }
  }

  /**
   * Each instance's containers, from the containers' view (which keeps them by instance): only those of the
   * instances whose containers changed, or that are new, or that a pass placed work on, are set again.
   */
  private holdContainers(): void {
    for (const id of this.view.takeTouched()) this.dirty.add(id);
    for (const id of this.dirty) {
      const inst = this.instances.get(id);
      if (inst) {
        inst.containers = this.view.containersOf(id);
        this.reshow(inst);
      }
    }
  }

  private async failNode(
    nodeId: string,
    instanceId: string | null,
    reason: string,
    now: Date,
  ): Promise<void> {
    try {
      await this.o.queue.failNode(nodeId, reason);
      this.emit({ kind: 'node-lost', at: now, node: nodeId, instance: instanceId, reason });
    } catch (err) {
      this.failed('failNode', err, now, { node: nodeId, ...(instanceId ? { instance: instanceId } : {}) });
    }
  }

  /**
   * Carries out a plan: one batched queue call per kind of container action (lock, then assign, unlock,
   * cancel), then the instance actions in plan order. A refused item is reported and retried by a later
   * pass, never by ad-hoc loops (DESIGN §6.1); it does not stop the others.
   */
  private async act(plan: Plan, now: Date): Promise<void> {
    const o = this.o;
    const of = <K extends Action['op']>(op: K) =>
      plan.actions.filter((a): a is Extract<Action, { op: K }> => a.op === op);
    const toLock = of('lock').map((a) => a.container);
    const starts = this.placeable(of('start'), now);
    // What this pass locks and places on a ready instance: locked and assigned in one queue call (one
    // statement, one row version); the rest is locked here and assigned below.
    const locking = new Set(toLock);
    const direct = starts.filter((it) => locking.has(it.id));
    const directIds = new Set(direct.map((it) => it.id));
    const granted = new Set([
      ...(await this.tryLock(
        toLock.filter((id) => !directIds.has(id)),
        (ids) => o.queue.lock(ids, o.id),
        now,
      )),
      ...(await this.tryLock([...directIds], () => o.queue.lockAssign(direct, o.id), now)),
    ]);
    const refused = new Set(toLock.filter((id) => !granted.has(id)));
    if (toLock.length > 0)
      this.emit({ kind: 'containers-locked', at: now, containers: [...granted], refused: [...refused] });
    for (const it of direct) if (granted.has(it.id)) this.placed(it, now);

    await this.assignAll(
      starts.filter((it) => !refused.has(it.id) && !directIds.has(it.id)),
      now,
    );
    await this.batch(
      'unlock',
      of('unlock').map((a) => ({ id: a.container, reason: a.reason })),
      (items) => o.queue.unlock(items, o.id),
      now,
      (item) => this.emit({ kind: 'container-unlocked', at: now, container: item.id, reason: item.reason }),
    );
    // A kill is the cancel of a withdrawn (priority 0) container that runs.
    const cancels = [
      ...of('cancel').map((a) => ({
        id: a.container,
        failureClass: a.class as FailureClass,
        reason: a.reason,
        retryable: a.retryable ?? true,
        ...(a.reclaimed ? { reclaimed: true } : {}),
      })),
      ...of('kill').map((a) => ({
        id: a.container,
        failureClass: 'user' as const,
        reason: 'priority is 0 (withdrawn)',
      })),
    ];
    await this.batch(
      'cancel',
      cancels,
      (items) => o.queue.cancel(items, o.id),
      now,
      (item) =>
        this.emit({
          kind: 'container-cancelled',
          at: now,
          container: item.id,
          failureClass: item.failureClass,
          reason: item.reason,
        }),
    );

    // Creates and destroys start here and run in the background; the pass does not wait for them.
    for (const a of plan.actions) {
      try {
        if (a.op === 'create') this.startCreate(a.type, a.for, now);
        else if (a.op === 'shutdown') {
          // A provisional id (a create in flight) is not shut down: its boot timeout applies once created.
          const inst = this.instances.get(a.instance);
          if (inst) this.shutdown(inst, a.reason, now);
        }
      } catch (err) {
        if (err instanceof IllegalInstanceTransition && STRICT_STATES) throw err;
        this.failed(a.op, err, now, actionSubject(a, this.instances));
      }
    }
  }

  /**
   * Moves an instance through the state machine (setState in pool.ts). An illegal transition is a bug:
   * it throws under STRICT_STATES (tests), and is reported as an `error` event otherwise.
   */
  private move(inst: PoolInstance, state: InstanceState, now: Date): boolean {
    try {
      this.reshow(inst);
      return setState(inst, state, now);
    } catch (err) {
      if (!(err instanceof IllegalInstanceTransition) || STRICT_STATES) throw err;
      this.failed('transition', err, now, { instance: inst.id, type: inst.type });
      return false;
    }
  }

  /** The creates in flight, as booting instances with provisional ids (one whose instance a sync already adopted is left out). */
  private provisional(): Snapshot['instances'] {
    if (this.creating.size === 0) return [];
    const bound = new Set<string>();
    for (const i of this.instances.values()) if (i.nodeId) bound.add(i.nodeId);
    return [...this.creating.values()]
      .filter((p) => p.nodeId === null || !bound.has(p.nodeId))
      .map((p) => ({
        id: p.id,
        type: p.type.name,
        state: 'booting' as const,
        idleBehavior: 'run' as const,
        containers: [],
        stateSince: p.startedAt,
        createdAt: p.startedAt,
        createdFor: p.forContainers,
      }));
  }

  /** Runs a create or destroy in the background; its outcome is applied between passes. */
  private background(work: () => Promise<Outcome>, op: string, subject: ErrorSubject): void {
    const done: Promise<void> = Promise.resolve()
      .then(work)
      .catch(
        (err: unknown): Outcome =>
          (at) =>
            this.failed(op, err, at, subject),
      )
      .then((outcome) => {
        this.outcomes.push(outcome);
        this.ops.delete(done);
        // Between passes it applies now (events keep their time); during one, the next pass applies it.
        if (this.running === null) this.applyOutcomes(this.o.clock.now());
        this.o.onOperationDone?.();
      });
    this.ops.add(done);
  }

  private applyOutcomes(now: Date): void {
    for (const outcome of this.outcomes.splice(0)) outcome(now);
  }

  /** Creates and destroys in flight. */
  get operationsInFlight(): { creates: number; destroys: number } {
    return { creates: this.creating.size, destroys: this.destroying.size };
  }

  /** Resolves once no create or destroy is in flight and every outcome was applied (tests, the simulator). */
  async settled(): Promise<void> {
    while (this.ops.size > 0) await Promise.all([...this.ops]);
    await this.statusWriter.flushed();
    if (this.running === null) this.applyOutcomes(this.o.clock.now());
  }

  /** The starts whose instance's agent is there to take the work; the others are deferred. */
  private placeable(starts: Extract<Action, { op: 'start' }>[], now: Date): AssignItem[] {
    const items: AssignItem[] = [];
    for (const a of starts) {
      const inst = this.instances.get(a.instance);
      if (!inst || !inst.nodeId || (inst.state !== 'idle' && inst.state !== 'running')) {
        const reason = !inst ? 'unknown instance' : !inst.nodeId ? 'no node' : `instance ${inst.state}`;
        this.emit({ kind: 'start-deferred', at: now, container: a.container, instance: a.instance, reason });
      } else items.push({ id: a.container, instance: inst.id, node: inst.nodeId });
    }
    return items;
  }

  /** The ids a lock call granted; none, each reported as an error, when the call failed. */
  private async tryLock(ids: string[], call: (ids: string[]) => Promise<string[]>, now: Date) {
    if (ids.length === 0) return [];
    try {
      return await call(ids);
    } catch (err) {
      for (const id of ids) this.failed('lock', err, now, { container: id });
      return [];
    }
  }

  /** A container the queue placed on an instance: the instance now runs it. */
  private placed(item: AssignItem, now: Date): void {
    const inst = this.instances.get(item.instance)!;
    // A new array (the view's are shared); the next pass sets it from the view again.
    inst.containers = [...inst.containers, item.id];
    this.reshow(inst);
    this.dirty.add(inst.id);
    this.move(inst, 'running', now);
    this.emit({ kind: 'container-placed', at: now, container: item.id, instance: inst.id });
  }

  /** Starts: placed in one batch. */
  private async assignAll(items: AssignItem[], now: Date): Promise<void> {
    await this.batch(
      'start',
      items,
      (batch) => this.o.queue.assign(batch, this.o.id),
      now,
      (item) => this.placed(item, now),
      (item) => ({ instance: item.instance, type: this.instances.get(item.instance)?.type }),
    );
  }

  /**
   * One batched queue call for `items`; `done` runs for each item the queue carried out, and each refused
   * item (or every item, when the call itself failed) is reported as an `error` event for `op`.
   */
  private async batch<I extends { id: string }>(
    op: string,
    items: I[],
    call: (items: I[]) => Promise<ItemOutcome[]>,
    now: Date,
    done: (item: I) => void,
    subject: (item: I) => ErrorSubject = () => ({}),
  ): Promise<void> {
    if (items.length === 0) return;
    let outcomes: ItemOutcome[];
    try {
      outcomes = await call(items);
    } catch (err) {
      for (const item of items) this.failed(op, err, now, { container: item.id, ...subject(item) });
      return;
    }
    outcomes.forEach((r, i) => {
      const item = items[i]!;
      if (r.ok) done(item);
      else this.failed(op, new QueueRefusal(r.reason), now, { container: item.id, ...subject(item) });
    });
  }

  /** Starts a create of `typeName` for `forContainers` unless max_concurrent_creates are in flight. */
  private startCreate(typeName: string, forContainers: string[], now: Date): void {
    const type = this.types.get(typeName);
    if (!type) throw new Error(`plan asked for unknown type ${typeName}`);
    // Over the bound, the create waits: the next pass (woken when one finishes) plans it again.
    if (this.creating.size >= (this.o.maxConcurrentCreates ?? Infinity)) return;
    const pending: PendingCreate = {
      id: `pending-${++this.pendingSeq}`,
      type,
      startedAt: now,
      nodeId: null,
      forContainers,
    };
    this.creating.set(pending.id, pending);
    this.background(() => this.create(pending, forContainers, now), 'create', { type: type.name });
  }

  /** The create itself (in the background): node record, cloud create, binding. */
  private async create(p: PendingCreate, forContainers: string[], now: Date): Promise<Outcome> {
    const o = this.o;
    const type = p.type;
    // The provisional instance counts until the outcome is applied, so no pass sees neither.
    const landed = () => this.creating.delete(p.id);
    try {
      // Labels are a courtesy for the cloud's cost reports: an instance is created without them if they
      // cannot be read now.
      const labels = o.labelsFor
        ? await o.labelsFor(forContainers).catch((err: unknown) => {
            this.failed('labels', err, now, { type: type.name });
            return {};
          })
        : {};
      const { nodeId, bootstrapSecret } = await o.queue.createNode(type.name, o.cluster, o.tag);
      p.nodeId = nodeId;
      let ci;
      try {
        ci = await o.driver.create(
          type,
          { ...labels, ...instanceTags(o.cluster, o.tag, type, nodeId, 'run') },
          o.bootData({ nodeId, bootstrapSecret, instanceType: type }),
        );
      } catch (err) {
        // The node record never gets an instance; the next passes ignore a failed node without one. (A
        // create whose response was lost may still have made the instance: a sync adopts it by its tags,
        // and its failed node has it shut down.)
        const nodeErr = await Promise.resolve()
          .then(() => o.queue.failNode(nodeId, `instance create failed: ${(err as Error).message}`))
          .then(
            () => null,
            (e: unknown) => e,
          );
        return (at) => {
          landed();
          if (nodeErr !== null) this.failed('failNode', nodeErr, at, { node: nodeId, type: type.name });
          const live =
            [...this.instances.values()].filter((i) => !isEndingInstanceState(i.state)).length +
            this.creating.size;
          const what = this.cloud.learn(err, type, o.instanceTypes, live, at.getTime());
          this.emit({
            kind: 'create-failed',
            at,
            type: type.name,
            message: what,
            errorClass: err instanceof Error ? err.constructor.name : typeof err,
          });
        };
      }
      const bindErr = await o.queue.bindNode(nodeId, ci.id).then(
        () => null,
        (e: unknown) => e,
      );
      const created = ci;
      return (at) => {
        landed();
        // Unbound, the node is still found through the instance's tags (nodeId): it is kept either way.
        if (bindErr !== null)
          this.failed('bindNode', bindErr, at, { node: nodeId, instance: created.id, type: type.name });
        // A sync may have adopted it already (listed before the create's response came back).
        if (!this.instances.has(created.id))
          this.addInstance({
            id: created.id,
            type: type.name,
            providerType: type.providerType,
            price: type.price,
            createdAt: created.createdAt,
            state: 'booting',
            stateSince: p.startedAt,
            idleBehavior: 'run',
            nodeId,
            containers: [],
            destroyAttemptAt: null,
            preemptible: type.preemptible,
            interruptionNotice: null,
            createdFor: forContainers,
          });
        this.emit({
          kind: 'instance-created',
          at,
          instance: created.id,
          type: type.name,
          price: type.price,
          for: forContainers,
        });
      };
    } catch (err) {
      return (at) => {
        landed();
        this.failed('create', err, at, { type: type.name });
      };
    }
  }

  /**
   * Chooses an instance for shutdown (DESIGN §6.3): from now on it takes no work and counts against the
   * limits until the cloud no longer lists it; its node is failed and its destroy started.
   */
  private shutdown(inst: PoolInstance, reason: string, now: Date): void {
    if (isEndingInstanceState(inst.state) || !this.move(inst, 'shutdown', now)) return;
    this.emit({ kind: 'instance-shutdown', at: now, instance: inst.id, reason });
    this.startDestroy(inst, now, reason);
  }

  /**
   * Starts a destroy (unless one is in flight). With `reason`, its node is failed first: its agent must not
   * report any more, and whatever it still held is retried elsewhere. The instance is destroyed even when
   * that cannot be written now (the node is then failed once its instance is gone: observe()).
   */
  private startDestroy(inst: PoolInstance, now: Date, reason: string | null): void {
    if (this.destroying.has(inst.id)) return;
    this.destroying.add(inst.id);
    inst.destroyAttemptAt = now.getTime();
    const subject = { instance: inst.id, type: inst.type };
    this.background(
      async () => {
        const nodeId = inst.nodeId;
        const nodeErr =
          reason !== null && nodeId !== null
            ? await Promise.resolve()
                .then(() => this.o.queue.failNode(nodeId, `instance shut down: ${reason}`))
                .then(
                  () => null,
                  (e: unknown) => e,
                )
            : null;
        let err: unknown = null;
        try {
          await this.o.driver.destroy(inst.id);
        } catch (e) {
          if (!(e instanceof CloudNotFound)) err = e;
        }
        return (at) => {
          this.destroying.delete(inst.id);
          if (err instanceof RateLimitError)
            this.destroyRefusedUntil.set(inst.id, err.earliestRetry.getTime());
          else this.destroyRefusedUntil.delete(inst.id);
          if (nodeErr !== null) this.failed('failNode', nodeErr, at, { node: nodeId!, ...subject });
          // Not accepted: it stays in shutdown, counted, and retryDestroys tries again after shutdown_retry.
          if (err !== null) return this.failed('destroy', err, at, subject);
          if (inst.state === 'shutdown') this.move(inst, 'destroy_pending', at);
          this.confirmGoneAfter ??= at.getTime();
          // Gone from the cloud's side; the next sync forgets it when the list no longer shows it.
          this.emit({ kind: 'instance-destroyed', at, instance: inst.id, type: inst.type });
        };
      },
      'destroy',
      subject,
    );
  }

  /**
   * Every instance chosen for shutdown and still there is destroyed again after shutdown_retry: its last
   * destroy failed, or the cloud accepted it but still lists the instance. Nothing the cloud may still bill
   * is forgotten.
   */
  private retryDestroys(now: Date): void {
    for (const inst of this.instances.values()) {
      if (
        (inst.state === 'shutdown' || inst.state === 'destroy_pending') &&
        inst.destroyAttemptAt !== null &&
        now.getTime() - inst.destroyAttemptAt >= this.o.shutdownRetryMs
      )
        this.startDestroy(inst, now, null);
    }
  }

  private async applyOperatorRequests(now: Date): Promise<void> {
    for (const r of await this.o.mirror!.requests()) {
      const inst = this.instances.get(r.instance);
      if (!inst) continue;
      if (r.kill) this.shutdown(inst, 'killed by an operator', now);
      else if (r.idleBehavior && r.idleBehavior !== inst.idleBehavior) {
        inst.idleBehavior = r.idleBehavior;
        this.reshow(inst);
        this.dirty.add(inst.id);
        await this.o.driver
          .setTags(inst.id, { [TAG.idle]: r.idleBehavior })
          .catch((err: unknown) => this.failed('setTags', err, now, { instance: inst.id, type: inst.type }));
      }
    }
  }

  /**
   * Shuts down every instance (an all-in-one `berth up` leaving the machine): their containers are
   * requeued (Locked) or retried (Running, temp), so a later start resumes the work.
   */
  async shutdownAll(reason: string): Promise<number> {
    // The pass and the creates in flight end first, so the instances they make are shut down too.
    await this.running?.catch(() => {});
    await this.settled();
    const now = this.o.clock.now();
    const live = [...this.instances.values()].filter((i) => i.state !== 'gone');
    // All at once: each destroy waits for its agent's grace, and the stop must end in bounded time.
    for (const inst of live) {
      if (isEndingInstanceState(inst.state)) this.startDestroy(inst, now, null);
      else this.shutdown(inst, reason, now);
    }
    await this.settled();
    // A stopping dispatcher runs no more passes, so no retryDestroys: what the cloud's rate limit (or
    // max_cloud_ops_per_second) refused is retried here once it may be, while each round destroys more
    // (a `berth up` with more instances than the burst left the rest running).
    const deadline = Date.now() + SHUTDOWN_ALL_RETRY_MS;
    let backoff = 50;
    for (let idle = 0; idle < SHUTDOWN_ALL_IDLE_ROUNDS;) {
      const refused = live.filter((i) => i.state === 'shutdown' && !this.destroying.has(i.id));
      if (refused.length === 0 || Date.now() >= deadline) break;
      const nowMs = this.o.clock.now().getTime();
      const at = Math.min(...refused.map((i) => this.destroyRefusedUntil.get(i.id) ?? nowMs + backoff));
      await new Promise((r) => setTimeout(r, Math.min(Math.max(at - nowMs, 10), 5_000)));
      for (const inst of refused) this.startDestroy(inst, this.o.clock.now(), null);
      await this.settled();
      // Rounds that destroy nothing (an error that is no rate limit) back off, and end after a few.
      if (live.filter((i) => i.state === 'shutdown').length < refused.length) idle = 0;
      else {
        idle++;
        backoff = Math.min(backoff * 2, 2_000);
      }
    }
    // Their records end now (when their billing ended), not at the next start.
    await this.o.mirror
      ?.publish([...this.instances.values()], now)
      .catch((err: unknown) => this.failed('publish', err, now, {}));
    return live.length;
  }

  /**
   * Graceful stop (DESIGN §6.3): finish the pass in flight, start nothing new, give the creates and
   * destroys in flight stop_grace to end, release the lease. One cut short leaves nothing inconsistent: a
   * create whose response never came is adopted by the next start's sync through its tags (and a retried
   * EC2 create is idempotent through its ClientToken); an unconfirmed destroy is retried from that state.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.running?.catch(() => {});
    await this.statusWriter.flushed();
    // A stop_grace past a Node timer's 24.8 days is waited out, not fired after 1 ms.
    const timers = longTimers(this.o.timers ?? nodeTimers);
    let timer: unknown;
    await Promise.race([
      this.settled(),
      new Promise<void>((resolve) => (timer = timers.setTimeout(resolve, this.o.stopGraceMs))),
    ]);
    timers.clearTimeout(timer);
    await this.o.queue.release(this.o.id, this.o.clock.now());
  }
}
