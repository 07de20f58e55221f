// The `sim` driver (DESIGN §7): a simulated cloud on a virtual clock, for tests and the simulator.
// Instances boot after a drawn delay, can be broken (never start their agent), can lose their agent, and
// preemptible ones can be interrupted after a notice. Operations fail by configured rates, capacity
// limits, outages, quota and an API rate limit, and a test can inject errors and hold calls.
// Cost per operation: create, destroy and setTags are O(1) map work plus O(log n) clock scheduling;
// list is O(instances), as a real cloud's list is.
import { namedRng, type Rng } from '../../model/clock.js';
import type { InstanceType } from '../../model/types.js';
import type { EventHandle, EventScheduler } from '../../sim/clock.js';
import { TokenBucket } from '../decorators/token-bucket.js';
import {
  matchesTags,
  type CloudInstance,
  type CloudInstanceState,
  type Driver,
  type Tags,
} from '../driver.js';
import { CapacityError, CloudApiError, NotFoundError, QuotaError, RateLimitError } from '../errors.js';
import { OpControls } from './controls.js';
import { exponential, sample } from './distribution.js';
import { resolveOptions, type ResolvedSimCloudOptions, type SimCloudOptions } from './options.js';

/** Something that happened inside the sim cloud that a simulated agent or a test reacts to. */
export type SimCloudEvent =
  /** The instance is up and its agent has started (it would now register with the API). */
  | { type: 'agent-started'; id: string; at: Date; bootData: string }
  /** The instance is running but its agent will never start (a broken instance). */
  | { type: 'broken'; id: string; at: Date }
  /** The agent process died; the machine keeps running (and billing). */
  | { type: 'agent-crashed'; id: string; at: Date }
  /** The cloud announced it will reclaim a preemptible instance at terminateAt. */
  | { type: 'interruption-notice'; id: string; at: Date; terminateAt: Date }
  /** The instance stopped: destroyed by us, interrupted (spot), or killed from outside. */
  | { type: 'terminated'; id: string; at: Date; reason: 'destroyed' | 'interrupted' | 'external' };

interface SimInstance {
  id: string;
  providerType: string;
  vcpus: number;
  preemptible: boolean;
  tags: Tags;
  state: CloudInstanceState;
  createdAt: number;
  interruptionNotice: number | null;
  bootData: string;
  timers: EventHandle[];
}

/** The simulated cloud. Implements Driver; the extra methods are for tests and the simulator. */
export class SimCloud implements Driver {
  readonly options: ResolvedSimCloudOptions;
  /** Call log, error injection and holds (see OpControls). */
  readonly controls: OpControls;
  private readonly byId = new Map<string, SimInstance>();
  private readonly liveByType = new Map<string, number>();
  private liveCount = 0;
  private liveVcpus = 0;
  private nextId = 1;
  private readonly bucket: TokenBucket | null;
  private readonly listeners: Array<(e: SimCloudEvent) => void> = [];
  private readonly rng: Record<
    'boot' | 'broken' | 'crash' | 'crashAfter' | 'spot' | 'createError' | 'destroyError' | 'capacity',
    Rng
  >;

  constructor(
    private readonly clock: EventScheduler,
    options: SimCloudOptions,
  ) {
    this.options = resolveOptions(options);
    this.controls = new OpControls(this.options.recordCalls);
    const stream = (name: string): Rng => namedRng(this.options.seed, name);
    this.rng = {
      boot: stream('boot'),
      broken: stream('broken'),
      crash: stream('crash'),
      crashAfter: stream('crashAfter'),
      spot: stream('spot'),
      createError: stream('createError'),
      destroyError: stream('destroyError'),
      capacity: stream('capacity'),
    };
    const rl = this.options.rateLimit;
    this.bucket = rl === null ? null : new TokenBucket(rl.opsPerSecond, rl.burst);
  }

  /** Subscribes to cloud events (agent started, crashed, interruption notices, terminations). */
  onEvent(listener: (e: SimCloudEvent) => void): void {
    this.listeners.push(listener);
  }

  async create(type: InstanceType, tags: Tags, bootData: string): Promise<CloudInstance> {
    await this.enter('create', [type.name, { ...tags }, bootData]);
    const now = this.clock.nowMs();
    if (this.options.createErrorRate > 0 && this.rng.createError() < this.options.createErrorRate)
      throw new CloudApiError('simulated create failure (createErrorRate)');
    this.checkCapacity(type.providerType, now);
    const { maxInstances, maxVcpus } = this.options.quota;
    if (maxInstances !== null && this.liveCount + 1 > maxInstances)
      throw new QuotaError(`at most ${maxInstances} instances`, { instances: maxInstances });
    if (maxVcpus !== null && this.liveVcpus + type.vcpus > maxVcpus)
      throw new QuotaError(`at most ${maxVcpus} vcpus`, { vcpus: maxVcpus });

    const inst: SimInstance = {
      id: `${this.options.idPrefix}${this.nextId++}`,
      providerType: type.providerType,
      vcpus: type.vcpus,
      preemptible: type.preemptible,
      tags: { ...tags },
      state: 'pending',
      createdAt: now,
      interruptionNotice: null,
      bootData,
      timers: [],
    };
    this.byId.set(inst.id, inst);
    this.liveByType.set(inst.providerType, (this.liveByType.get(inst.providerType) ?? 0) + 1);
    this.liveCount++;
    this.liveVcpus += inst.vcpus;
    this.planLife(inst, now);
    return this.view(inst);
  }

  async list(tagFilter: Tags): Promise<CloudInstance[]> {
    await this.enter('list', [{ ...tagFilter }]);
    const out: CloudInstance[] = [];
    for (const inst of this.byId.values()) if (matchesTags(inst.tags, tagFilter)) out.push(this.view(inst));
    return out;
  }

  async destroy(id: string): Promise<void> {
    await this.enter('destroy', [id]);
    const inst = this.byId.get(id);
    if (inst === undefined) throw new NotFoundError(id);
    if (inst.state === 'terminated') return;
    if (this.options.destroyErrorRate > 0 && this.rng.destroyError() < this.options.destroyErrorRate)
      throw new CloudApiError('simulated destroy failure (destroyErrorRate)');
    this.terminate(inst, 'destroyed');
  }

  async setTags(id: string, tags: Tags): Promise<void> {
    await this.enter('setTags', [id, { ...tags }]);
    const inst = this.byId.get(id);
    if (inst === undefined) throw new NotFoundError(id);
    Object.assign(inst.tags, tags);
  }

  /** Kills an instance from outside Berth (an operator, a hardware failure). No-op if already gone. */
  kill(id: string): void {
    const inst = this.byId.get(id);
    if (inst !== undefined && inst.state !== 'terminated') this.terminate(inst, 'external');
  }

  /**
   * Interrupts a preemptible instance now, as the cloud would: a notice at once, termination `noticeMs`
   * later (default the spot option's notice). Throws NotFoundError for an unknown or terminated instance.
   */
  interrupt(id: string, noticeMs = this.options.spot.noticeMs): void {
    const inst = this.byId.get(id);
    if (inst === undefined || inst.state === 'terminated') throw new NotFoundError(id);
    const now = this.clock.nowMs();
    inst.interruptionNotice = now;
    this.emit({
      type: 'interruption-notice',
      id,
      at: this.clock.now(),
      terminateAt: new Date(now + noticeMs),
    });
    inst.timers.push(this.clock.schedule(now + noticeMs, () => this.terminate(inst, 'interrupted')));
  }

  /** One instance as list() would show it, or undefined once the cloud has forgotten it. */
  get(id: string): CloudInstance | undefined {
    const inst = this.byId.get(id);
    return inst === undefined ? undefined : this.view(inst);
  }

  /** Instances not terminated. */
  get live(): number {
    return this.liveCount;
  }

  /** Records the call, waits if held, then applies injected errors and the API rate limit. */
  private async enter(op: 'create' | 'list' | 'destroy' | 'setTags', args: unknown[]): Promise<void> {
    this.controls.record(op, this.clock.now(), args);
    const gate = this.controls.gate(op);
    if (gate !== null) await gate;
    this.controls.throwInjected(op);
    if (this.bucket !== null) {
      const retryAt = this.bucket.take(this.clock.nowMs());
      if (retryAt !== null) throw new RateLimitError(new Date(retryAt), 'cloud', 'simulated API rate limit');
    }
  }

  private checkCapacity(providerType: string, now: number): void {
    const group = this.options.quotaGroups[providerType];
    for (const w of this.options.outages) {
      if (now < w.fromMs || now >= w.untilMs) continue;
      if (w.scope === 'all') throw new CapacityError('all', null, 'simulated outage');
      if (w.scope === 'type' && w.subject === providerType)
        throw new CapacityError('type', providerType, 'simulated outage');
      if (w.scope === 'quota-group' && group !== undefined && w.subject === group)
        throw new CapacityError('quota-group', group, 'simulated outage');
    }
    const cap = this.options.typeCapacity[providerType];
    if (cap !== undefined && (this.liveByType.get(providerType) ?? 0) >= cap)
      throw new CapacityError('type', providerType, `no capacity beyond ${cap} instances`);
    const p = this.options.capacityErrorRate[providerType];
    if (p !== undefined && p > 0 && this.rng.capacity() < p)
      throw new CapacityError('type', providerType, 'simulated capacity shortage');
  }

  /** Draws the instance's future (boot, breakage, agent crash, interruption) and schedules it. */
  private planLife(inst: SimInstance, now: number): void {
    const o = this.options;
    // Every draw happens for every instance, whatever the outcome, so each stream advances once per
    // create and one knob's value never shifts another knob's draws.
    const bootAt = now + sample(o.bootTime, this.rng.boot);
    const broken = this.rng.broken() < o.neverBootRate;
    const crashes = this.rng.crash() < o.agentCrashRate;
    const crashAfter = sample(o.agentCrashAfter, this.rng.crashAfter);
    const spotDraw = exponential(1, this.rng.spot);

    inst.timers.push(
      this.clock.schedule(bootAt, () => {
        inst.state = 'running';
        if (broken) return this.emit({ type: 'broken', id: inst.id, at: this.clock.now() });
        this.emit({ type: 'agent-started', id: inst.id, at: this.clock.now(), bootData: inst.bootData });
        if (crashes)
          inst.timers.push(
            this.clock.schedule(bootAt + crashAfter, () =>
              this.emit({ type: 'agent-crashed', id: inst.id, at: this.clock.now() }),
            ),
          );
      }),
    );

    const perHour = o.spot.byType[inst.providerType] ?? o.spot.interruptionsPerHour;
    if (inst.preemptible && perHour > 0) {
      const endAt = now + Math.round((spotDraw * 3_600_000) / perHour);
      const noticeAt = Math.max(now, endAt - o.spot.noticeMs);
      inst.timers.push(
        this.clock.schedule(noticeAt, () => {
          inst.interruptionNotice = noticeAt;
          this.emit({
            type: 'interruption-notice',
            id: inst.id,
            at: this.clock.now(),
            terminateAt: new Date(endAt),
          });
        }),
        this.clock.schedule(endAt, () => this.terminate(inst, 'interrupted')),
      );
    }
  }

  private terminate(inst: SimInstance, reason: 'destroyed' | 'interrupted' | 'external'): void {
    for (const t of inst.timers) t.cancel();
    inst.timers = [];
    inst.state = 'terminated';
    this.liveByType.set(inst.providerType, (this.liveByType.get(inst.providerType) ?? 1) - 1);
    this.liveCount--;
    this.liveVcpus -= inst.vcpus;
    this.emit({ type: 'terminated', id: inst.id, at: this.clock.now(), reason });
    // Real clouds keep listing terminated instances for a while, then forget them.
    this.clock.schedule(this.clock.nowMs() + this.options.terminatedVisibleMs, () =>
      this.byId.delete(inst.id),
    );
  }

  private emit(e: SimCloudEvent): void {
    for (const l of this.listeners) l(e);
  }

  private view(inst: SimInstance): CloudInstance {
    return {
      id: inst.id,
      providerType: inst.providerType,
      tags: { ...inst.tags },
      state: inst.state,
      createdAt: new Date(inst.createdAt),
      preemptible: inst.preemptible,
      interruptionNotice: inst.interruptionNotice === null ? null : new Date(inst.interruptionNotice),
    };
  }
}
