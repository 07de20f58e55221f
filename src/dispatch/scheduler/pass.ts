// The state of one scheduler pass: what the phases of plan() (plan.ts) read and write. One object, so each
// phase is a function of it instead of closures sharing caches.
import type { InstanceType } from '../../model/types.js';
import { Capacity, type Slot } from './capacity.js';
import { buildShape, compareTypes, ShapeCache, type Shape } from './fitting.js';
import { Limits, type LimitBlock } from './limits.js';
import { Borrowing } from './opportunistic.js';
import { Owners } from './owners.js';
import type { KeptPass } from './kept.js';
import { assignments, viewPool, type PoolView } from './pool.js';
import { Statuses } from './statuses.js';
import type { Action, Snapshot, SnapshotContainer } from './types.js';

/** The first container a global limit stopped (rule 5). */
export interface Head {
  container: SnapshotContainer;
  limit: string;
  block: LimitBlock;
  /** The type it waits for. */
  type: InstanceType;
}

/** A placement made in this pass by a Locked container: the one kind rule 5 may take back. */
export interface Placement {
  c: SnapshotContainer;
  shape: Shape;
  slot: Slot;
  /** Index of its start action in `placeActions`, or -1 when it waits for a booting/new instance. */
  action: number;
  evicted: boolean;
}

export class Pass {
  readonly config: Snapshot['config'];
  readonly now: number;
  readonly sortedTypes: InstanceType[];
  readonly typesByName: Map<string, InstanceType>;
  readonly typeIndex: Map<string, number>;
  readonly limits: Limits;
  readonly statuses = new Statuses();
  readonly kills: Action[] = [];
  readonly cancels: Action[] = [];
  readonly unlocks: Action[] = [];
  /** Locks and starts in queue order; a start taken back by rule 5 becomes null. */
  readonly placeActions: (Action | null)[] = [];
  readonly pool: PoolView;
  readonly capacity: Capacity;
  readonly shapes: ShapeCache;
  readonly owners: Owners;
  /** What running guaranteed containers lend to opportunistic ones (opportunistic.ts). */
  readonly borrowing: Borrowing;
  /** Containers assigned to each instance (Locked with an instance, or Running): pool.ts assignments. */
  readonly assigned: Map<string, SnapshotContainer[]>;
  /**
   * Containers that wait for a place, in input order (queueOrder sorts them): settle's (settle.ts), which
   * an incremental planner keeps for the next pass; nothing changes it after settle.
   */
  waiting: SnapshotContainer[] = [];
  readonly evictable: Placement[] = [];
  head: Head | null = null;
  /** Instances planned in this pass so far (their provisional ids are new-1, new-2, …). */
  planned = 0;
  /** When the plan stops being what a pass would give if only the clock moved (Plan.validUntil). */
  validUntil = Infinity;

  /** `kept`: what the last passes kept (kept.ts); none for a pass from scratch. */
  constructor(
    readonly snap: Snapshot,
    readonly kept?: KeptPass,
  ) {
    this.config = snap.config;
    this.now = snap.now.getTime();
    this.sortedTypes = [...snap.instanceTypes].sort(compareTypes);
    this.typesByName = new Map(this.sortedTypes.map((t) => [t.name, t]));
    this.typeIndex = new Map(this.sortedTypes.map((t, i) => [t.name, i]));
    this.limits = new Limits(snap);
    const rateLimit = snap.cloud.rateLimitedUntil?.getTime() ?? -Infinity;
    if (rateLimit > this.now) this.until(rateLimit);
    const until = (at: number) => this.until(at);
    // An incremental planner's are updated from, or the same as, the last pass's (kept-pool.ts).
    const assigned = kept === undefined ? assignments(snap.containers) : kept.pool.assigned(snap.containers);
    this.assigned = assigned;
    const view = () =>
      viewPool(snap, this.typesByName, this.typeIndex, assigned, this.limits, until, kept?.order);
    const types = { typesByName: this.typesByName, typeIndex: this.typeIndex };
    this.pool = kept === undefined ? view() : kept.pool.view(snap, this.limits, until, view, types);
    const borrowing = () => Borrowing.of(assigned, this.pool.instanceOf, this.config, snap.estimates);
    this.borrowing =
      kept === undefined ? borrowing() : kept.pool.borrowing(this.config, snap.estimates, borrowing);
    this.capacity = new Capacity(
      this.pool.slots,
      this.config.maxContainersPerInstance,
      this.sortedTypes,
      this.config.ramOverhead,
      this.limits,
      this.config.shareRule,
      this.config.batchPacking,
    );
    const sortedTypes = this.sortedTypes;
    const config = this.config;
    const shapes = () =>
      new ShapeCache((c) => buildShape(c, sortedTypes, config), config.onDemandAfterInterruptions);
    this.shapes = kept === undefined ? shapes() : kept.shapes(snap.instanceTypes, config, shapes);
    this.owners = new Owners(this.config.maxRunningPerUser);
  }

  /** Records that a decision of this pass changes at `at` (ms) if nothing else does. */
  until(at: number): void {
    if (at > this.now && at < this.validUntil) this.validUntil = at;
  }

  /** A status for a container that does not wait in the queue. */
  say(c: SnapshotContainer, text: string): void {
    this.statuses.own.set(c.id, text);
  }
}
