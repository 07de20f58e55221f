// The dispatcher (DESIGN §6.1): snapshot → plan → act, and the periodic sync with the cloud's list.
// Everything it knows is rebuilt from the queue and the cloud on start, so it can be killed at any time.
// The same code runs in `berth dispatch`, in `berth up` and in the simulator.
import type { Driver, Tags } from '../cloud/driver.js';
import { NotFoundError as CloudNotFound } from '../cloud/errors.js';
import type { Clock } from '../model/clock.js';
import type { FailureClass, IdleBehavior, InstanceType } from '../model/types.js';
import { CloudMemory } from './cloud-memory.js';
import { ContainerView } from './container-view.js';
import type { DispatcherTimers } from './config.js';
import { NodeWatch } from './node-watch.js';
import { adopt, instanceTags, setState, stateFromNode, TAG, type PoolInstance } from './pool.js';
import type { AssignItem, DispatchQueue, ItemOutcome, NodeView } from './ports.js';
import { StatusWriter } from './status-writer.js';
import { IncrementalPlanner } from './scheduler/incremental.js';
import { plan as realPlan } from './scheduler/plan.js';
import type {
  Action,
  CloudState,
  Plan,
  SchedulerConfig,
  Snapshot,
  SnapshotContainer,
} from './scheduler/types.js';

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
}

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
  private lastSync = -Infinity;
  private synced = false;
  private readonly statusWriter: StatusWriter;
  private stopped = false;
  private running: Promise<void> | null = null;
  /** The containers across passes, and their recent arrivals (container-view.ts). */
  private readonly view: ContainerView;
  private readonly planner: IncrementalPlanner;
  /** The last plan, for `berth why` and tests. */
  lastPlan: Plan | null = null;

  /**
   * When the next pass could decide something new with no event: the last plan's validUntil, or when a
   * recent arrival leaves the arrival window (ms; Infinity when neither). The simulator wakes then.
   */
  nextDecisionAt(): number {
    const plan = this.lastPlan?.validUntil ?? Infinity;
    // Arrivals only decide which idle instances stay warm.
    for (const i of this.instances.values())
      if (i.state === 'idle') return Math.min(plan, this.view.arrivalsChangeAt());
    return plan;
  }

  /** How many passes planned in full and how many reused the last plan (scheduler/incremental.ts). */
  get plannerStats(): { full: number; reused: number } {
    return { ...this.planner.stats };
  }

  constructor(private readonly o: DispatcherOptions) {
    this.types = new Map(o.instanceTypes.map((t) => [t.name, t]));
    this.view = new ContainerView(o.config.arrivalWindowMs);
    this.statusWriter = new StatusWriter(o.queue, o.id, o.statusIntervalMs);
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

  /** One pass. Concurrent calls share the pass in flight (callers coalesce events into ticks). */
  tick(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    this.running ??= this.pass()
      .catch((err: unknown) => {
        this.watch.passFailed();
        throw err;
      })
      .finally(() => (this.running = null));
    return this.running;
  }

  private async pass(): Promise<void> {
    const o = this.o;
    const now = o.clock.now();
    this.watch.passStarted(now.getTime());
    if (!(await o.queue.heartbeat(o.id, o.cluster, o.tag, now, o.dispatcherLostAfterMs))) {
      throw new LeaseLostError(`another live dispatcher holds the lease for ${o.id}`);
    }
    if (!this.synced || now.getTime() - this.lastSync >= o.syncIntervalMs) await this.sync(now);
    if (o.mirror) await this.applyOperatorRequests(now);
    if (o.apiHealth && this.watch.probeDue(now.getTime()))
      this.watch.apiProbed(await o.apiHealth().catch(() => false), now.getTime());
    const nodes = await o.queue.nodes(o.cluster, o.tag, now);
    const containers = await this.view.read(o.queue, o.id, now, o.fullReloadPasses);
    await this.observe(nodes, containers, now);
    await this.retryDestroys(now);

    const snapshot: Snapshot = {
      now,
      config: { ...o.config, maxDispatchAttempts: await o.queue.maxDispatchAttempts() },
      instanceTypes: o.instanceTypes,
      instances: [...this.instances.values()]
        .filter((i) => i.state !== 'gone')
        .map((i) => ({
          id: i.id,
          type: i.type,
          state: i.state,
          idleBehavior: i.idleBehavior,
          containers: i.containers,
          stateSince: i.stateSince,
          createdAt: i.createdAt,
        })),
      containers,
      cloud: this.cloud.state(o.instanceTypes, now.getTime()),
      arrivals: this.view.arrivals(now),
    };
    const plan = this.planner.plan(snapshot);
    this.lastPlan = plan;
    await this.act(plan, now);
    await this.statusWriter.save(plan.statuses, now);
    if (o.mirror)
      await o.mirror.publish([...this.instances.values()], now, {
        instanceTypes: o.instanceTypes,
        config: snapshot.config,
        cloud: snapshot.cloud,
      });
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
      if (!known) this.instances.set(ci.id, adopt(ci, this.types, now));
      else {
        if (ci.interruptionNotice && !known.interruptionNotice && known.idleBehavior !== 'drain') {
          // The cloud will reclaim it: give it no new work, and let it go as soon as it is empty.
          known.idleBehavior = 'drain';
          this.emit({
            kind: 'instance-interrupted',
            at: now,
            instance: known.id,
            noticeAt: ci.interruptionNotice,
          });
        }
        known.interruptionNotice = ci.interruptionNotice;
        // Destroyed, but the cloud still lists it as live after shutdown_retry: destroy again.
        if (
          known.state === 'shutdown' &&
          known.destroyAttemptAt !== null &&
          now.getTime() - known.destroyAttemptAt >= o.shutdownRetryMs
        ) {
          await this.destroy(known, now);
        }
      }
    }
    for (const inst of [...this.instances.values()]) {
      // Only what existed before the list was taken can be missing from it.
      if (seen.has(inst.id) || inst.createdAt.getTime() > now.getTime()) continue;
      // One we shut down ourselves is simply gone; any other vanished under us (preempted, killed outside).
      if (inst.nodeId && inst.state !== 'shutdown')
        await this.failNode(inst.nodeId, inst.id, 'its instance disappeared from the cloud', now);
      this.instances.delete(inst.id);
      this.cloud.instanceGone();
      this.emit({ kind: 'instance-gone', at: now, instance: inst.id });
    }
    this.synced = true;
    this.lastSync = now.getTime();
  }

  /** Updates instance states from nodes and assignments; fails lost nodes. */
  private async observe(nodes: NodeView[], containers: SnapshotContainer[], now: Date): Promise<void> {
    const byInstance = new Map<string, string[]>();
    for (const c of containers)
      if (c.instance)
        (byInstance.get(c.instance) ?? byInstance.set(c.instance, []).get(c.instance)!).push(c.id);
    const nodeById = new Map(nodes.map((n) => [n.id, n]));
    for (const inst of this.instances.values()) {
      inst.containers = byInstance.get(inst.id) ?? [];
      if (inst.state === 'shutdown' || inst.state === 'gone') continue;
      const node = inst.nodeId ? nodeById.get(inst.nodeId) : undefined;
      if (node?.state === 'failed') {
        await this.shutdown(inst, 'its node failed', now);
        continue;
      }
      if (
        node &&
        node.lastPingAt &&
        node.state !== 'registered' &&
        this.watch.lost(node.lastPingAt.getTime(), now.getTime())
      ) {
        const silent = Math.round((now.getTime() - node.lastPingAt.getTime()) / 1000);
        await this.failNode(
          node.id,
          inst.id,
          `no ping for ${silent}s (node_lost_after ${Math.round(this.o.nodeLostAfterMs / 1000)}s)`,
          now,
        );
        await this.shutdown(inst, 'its node was lost', now);
        continue;
      }
      if ((node?.state === 'draining' || node?.state === 'drained') && inst.idleBehavior === 'run') {
        // The agent drains on its own: the cloud announced it will reclaim the instance (a spot
        // interruption) or recommends moving off it. No new work; shut down once empty.
        inst.idleBehavior = 'drain';
        this.emit({ kind: 'instance-interrupted', at: now, instance: inst.id, noticeAt: now });
      }
      const was = inst.state;
      if (
        setState(inst, stateFromNode(inst, node), now) &&
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
    for (const node of nodes) {
      if (node.state === 'failed' || !node.instanceId || this.instances.has(node.instanceId)) continue;
      await this.failNode(node.id, node.instanceId, 'its instance is gone', now);
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
    let granted = new Set<string>();
    try {
      granted = new Set(toLock.length > 0 ? await o.queue.lock(toLock, o.id) : []);
    } catch (err) {
      for (const id of toLock) this.failed('lock', err, now, { container: id });
    }
    const refused = new Set(toLock.filter((id) => !granted.has(id)));
    if (toLock.length > 0)
      this.emit({ kind: 'containers-locked', at: now, containers: [...granted], refused: [...refused] });

    await this.assignAll(
      of('start').filter((a) => !refused.has(a.container)),
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

    for (const a of plan.actions) {
      try {
        if (a.op === 'create') await this.create(a.type, a.for, now);
        else if (a.op === 'shutdown') {
          const inst = this.instances.get(a.instance);
          if (inst) await this.shutdown(inst, a.reason, now);
        }
      } catch (err) {
        this.failed(a.op, err, now, actionSubject(a, this.instances));
      }
    }
  }

  /** Starts: placed in one batch on the instances whose agent is there to take the work. */
  private async assignAll(starts: Extract<Action, { op: 'start' }>[], now: Date): Promise<void> {
    const items: AssignItem[] = [];
    for (const a of starts) {
      const inst = this.instances.get(a.instance);
      if (!inst || !inst.nodeId || (inst.state !== 'idle' && inst.state !== 'running')) {
        const reason = !inst ? 'unknown instance' : !inst.nodeId ? 'no node' : `instance ${inst.state}`;
        this.emit({ kind: 'start-deferred', at: now, container: a.container, instance: a.instance, reason });
      } else items.push({ id: a.container, instance: inst.id, node: inst.nodeId });
    }
    await this.batch(
      'start',
      items,
      (batch) => this.o.queue.assign(batch, this.o.id),
      now,
      (item) => {
        const inst = this.instances.get(item.instance)!;
        inst.containers.push(item.id);
        setState(inst, 'running', now);
        this.emit({ kind: 'container-placed', at: now, container: item.id, instance: inst.id });
      },
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

  private async create(typeName: string, forContainers: string[], now: Date): Promise<void> {
    const o = this.o;
    const type = this.types.get(typeName);
    if (!type) throw new Error(`plan asked for unknown type ${typeName}`);
    // Labels are a courtesy for the cloud's cost reports: an instance is created without them if they
    // cannot be read now.
    const labels = o.labelsFor
      ? await o.labelsFor(forContainers).catch((err: unknown) => {
          this.failed('labels', err, now, { type: type.name });
          return {};
        })
      : {};
    const { nodeId, bootstrapSecret } = await o.queue.createNode(type.name, o.cluster, o.tag);
    let ci;
    try {
      ci = await o.driver.create(
        type,
        { ...labels, ...instanceTags(o.cluster, o.tag, type, nodeId, 'run') },
        o.bootData({ nodeId, bootstrapSecret, instanceType: type }),
      );
    } catch (err) {
      const live = [...this.instances.values()].filter(
        (i) => i.state !== 'shutdown' && i.state !== 'gone',
      ).length;
      const what = this.cloud.learn(err, type, o.instanceTypes, live, now.getTime());
      this.emit({
        kind: 'create-failed',
        at: now,
        type: type.name,
        message: what,
        errorClass: err instanceof Error ? err.constructor.name : typeof err,
      });
      // The node record never gets an instance; the next passes ignore a failed node without one.
      await o.queue
        .failNode(nodeId, `instance create failed: ${(err as Error).message}`)
        .catch((e: unknown) => this.failed('failNode', e, now, { node: nodeId, type: type.name }));
      return;
    }
    await o.queue.bindNode(nodeId, ci.id);
    this.instances.set(ci.id, {
      id: ci.id,
      type: type.name,
      providerType: type.providerType,
      price: type.price,
      createdAt: ci.createdAt,
      state: 'booting',
      stateSince: now,
      idleBehavior: 'run',
      nodeId,
      containers: [],
      destroyAttemptAt: null,
      destroyFailed: false,
      preemptible: type.preemptible,
      interruptionNotice: null,
    });
    this.emit({
      kind: 'instance-created',
      at: now,
      instance: ci.id,
      type: type.name,
      price: type.price,
      for: forContainers,
    });
  }

  private async shutdown(inst: PoolInstance, reason: string, now: Date): Promise<void> {
    if (inst.state !== 'shutdown') {
      setState(inst, 'shutdown', now);
      this.emit({ kind: 'instance-shutdown', at: now, instance: inst.id, reason });
      // Its agent must not report any more; whatever it still held is retried elsewhere. Destroyed even
      // when that cannot be written now (the node is then failed once its instance is gone: observe()).
      if (inst.nodeId)
        await this.o.queue
          .failNode(inst.nodeId, `instance shut down: ${reason}`)
          .catch((err: unknown) =>
            this.failed('failNode', err, now, { node: inst.nodeId!, instance: inst.id, type: inst.type }),
          );
    }
    await this.destroy(inst, now);
  }

  private async destroy(inst: PoolInstance, now: Date): Promise<void> {
    inst.destroyAttemptAt = now.getTime();
    inst.destroyFailed = false;
    try {
      await this.o.driver.destroy(inst.id);
    } catch (err) {
      if (!(err instanceof CloudNotFound)) {
        inst.destroyFailed = true;
        this.failed('destroy', err, now, { instance: inst.id, type: inst.type });
        return;
      }
    }
    // Gone from the cloud's side; the next sync forgets it when the list no longer shows it.
    this.emit({ kind: 'instance-destroyed', at: now, instance: inst.id, type: inst.type });
  }

  private async retryDestroys(now: Date): Promise<void> {
    for (const inst of this.instances.values()) {
      if (
        inst.state === 'shutdown' &&
        inst.destroyFailed &&
        inst.destroyAttemptAt !== null &&
        now.getTime() - inst.destroyAttemptAt >= this.o.shutdownRetryMs
      )
        await this.destroy(inst, now);
    }
  }

  private async applyOperatorRequests(now: Date): Promise<void> {
    for (const r of await this.o.mirror!.requests()) {
      const inst = this.instances.get(r.instance);
      if (!inst) continue;
      if (r.kill) await this.shutdown(inst, 'killed by an operator', now);
      else if (r.idleBehavior && r.idleBehavior !== inst.idleBehavior) {
        inst.idleBehavior = r.idleBehavior;
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
    const now = this.o.clock.now();
    const live = [...this.instances.values()].filter((i) => i.state !== 'gone');
    // All at once: each destroy waits for its agent's grace, and the stop must end in bounded time.
    await Promise.all(
      live.map((inst) =>
        this.shutdown(inst, reason, now).catch((err: unknown) =>
          this.failed('shutdown', err, now, { instance: inst.id, type: inst.type }),
        ),
      ),
    );
    // Their records end now (when their billing ended), not at the next start.
    await this.o.mirror
      ?.publish([...this.instances.values()], now)
      .catch((err: unknown) => this.failed('publish', err, now, {}));
    return live.length;
  }

  /** Graceful stop (DESIGN §6.3): finish the pass in flight, start nothing new, release the lease. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.running?.catch(() => {});
    await this.o.queue.release(this.o.id, this.o.clock.now());
  }
}
