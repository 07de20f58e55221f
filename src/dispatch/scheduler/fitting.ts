// Which instance types a container can use (DESIGN §6.2 rules 2 and 3). Containers are grouped by "shape"
// (resources, preemptibility, allow-list) so the type search runs once per shape, not once per container:
// a queue of a million containers usually has a few dozen shapes.
//
// The share rule (rule 3): a container may use room on an instance when its share of the instance's price
// (the price × the largest fraction of the instance's resources it takes) is within max_price_factor of
// its cheapest type's price. A 1-vcpu container's share of a free quarter of a 4-vcpu instance is a
// quarter of that instance's price, not all of it.
import { formatSize } from '../../model/units.js';
import type { InstanceType } from '../../model/types.js';
import { containerNeed, fits, largestFraction, typeCapacity, type Res } from './resources.js';
import type { ContainerShape, SchedulerConfig, SnapshotContainer } from './types.js';

/** Everything the scheduler needs to know about one container shape. */
export interface Shape {
  key: string;
  need: Res;
  /** Types that fit, cheapest first (ties: more ram, more vcpus, name). */
  fitting: InstanceType[];
  /** The price of the cheapest fitting type. */
  cheapestPrice: number;
  /**
   * cheapestPrice × max_price_factor: the most a new instance for it may cost when its cheapest type
   * cannot be created, and the most its share of an existing instance's price may be.
   */
  maxPrice: number;
  /** Its share of each type's price (price × the largest fraction it takes), by type index; Infinity where it does not fit. */
  shareByIndex: Float64Array;
  /** Types whose instances it may use (it fits and its share is within maxPrice), by type index: a byte lookup per slot. */
  usableByIndex: Uint8Array;
  /** Its share of its cheapest type's price: what it costs per container packed on its own (batch packing). */
  cheapestShare: number;
  /** A preemptible container interrupted on_demand_after_interruptions times: on-demand types only. */
  onDemandOnly: boolean;
  /** Why no type can ever fit, or null. */
  unsatisfiable: string | null;
}

/** What shapes depend on besides the container and the types. */
export type ShapeConfig = Pick<
  SchedulerConfig,
  'ramOverhead' | 'maxPriceFactor' | 'maxSpendPerHour' | 'onDemandAfterInterruptions' | 'shareRule'
>;

/** A container's shape alone (what an arrival count or a fan-out records of it). */
export function shapeOf(c: ContainerShape): ContainerShape {
  return {
    vcpus: c.vcpus,
    ram: c.ram,
    scratch: c.scratch,
    gpus: c.gpus,
    preemptible: c.preemptible,
    instanceTypes: c.instanceTypes,
  };
}

/** Rule 2's order: cheapest, then more ram, more vcpus, then name. */
export function compareTypes(a: InstanceType, b: InstanceType): number {
  return (
    a.price - b.price ||
    b.ram - a.ram ||
    b.vcpus - a.vcpus ||
    (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)
  );
}

/** Shapes seen in this pass, found without building a key string per container. */
export class ShapeCache {
  // Keyed by ram in MiB (a small integer: the cheapest kind of map key), then a short linear scan over
  // the shapes with that ram. Formatting a key string for each of a million containers cost more.
  private readonly byRam = new Map<number, { c: SnapshotContainer; shape: Shape }[]>();
  /** How many shapes it holds. */
  size = 0;

  constructor(
    private readonly build: (c: SnapshotContainer) => Shape,
    private readonly onDemandAfter: number | null,
  ) {}

  get(c: SnapshotContainer): Shape {
    const k = Math.floor(c.ram / 1048576);
    let list = this.byRam.get(k);
    if (list === undefined) {
      list = [];
      this.byRam.set(k, list);
    }
    for (const e of list) if (sameShape(e.c, c, this.onDemandAfter)) return e.shape;
    const shape = this.build(c);
    list.push({ c, shape });
    this.size++;
    return shape;
  }
}

/** Whether a preemptible container's spot interruptions send it on demand (on_demand_after_interruptions). */
function sentOnDemand(c: SnapshotContainer, after: number | null): boolean {
  return after !== null && (c.spotInterruptions ?? 0) >= after;
}

function sameShape(a: SnapshotContainer, b: SnapshotContainer, onDemandAfter: number | null): boolean {
  if (a.ram !== b.ram || a.vcpus !== b.vcpus || a.scratch !== b.scratch || a.gpus !== b.gpus) return false;
  if (a.preemptible !== b.preemptible) return false;
  if (a.preemptible && sentOnDemand(a, onDemandAfter) !== sentOnDemand(b, onDemandAfter)) return false;
  const x = a.instanceTypes;
  const y = b.instanceTypes;
  if (x === y) return true;
  if (x === null || y === null || x.length !== y.length) return false;
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
  return true;
}

export function shapeKey(c: SnapshotContainer, onDemandOnly: boolean): string {
  const allow = c.instanceTypes === null ? '*' : c.instanceTypes.join(',');
  const kind = c.preemptible ? (onDemandOnly ? 2 : 1) : 0;
  return `${c.vcpus}|${c.ram}|${c.scratch}|${c.gpus}|${kind}|${allow}`;
}

/** Builds the shape of a container; `sortedTypes` must already be in compareTypes order. */
export function buildShape(c: SnapshotContainer, sortedTypes: InstanceType[], config: ShapeConfig): Shape {
  const need = containerNeed(c);
  const allow = c.instanceTypes === null ? null : new Set(c.instanceTypes);
  const allowed = sortedTypes.filter((t) => allow === null || allow.has(t.name));
  const onDemand = allowed.filter((t) => !t.preemptible);
  // A preemptible container may use either kind of type, a non-preemptible one only on-demand types. After
  // on_demand_after_interruptions it runs on demand too, if an on-demand type can hold it at all.
  const onDemandOnly =
    c.preemptible &&
    sentOnDemand(c, config.onDemandAfterInterruptions) &&
    onDemand.some((t) => fits(need, typeCapacity(t, config.ramOverhead)));
  const candidates = c.preemptible && !onDemandOnly ? allowed : onDemand;
  const fitting = candidates.filter((t) => fits(need, typeCapacity(t, config.ramOverhead)));
  const fitSet = new Set(fitting);
  const cheapestPrice = fitting.length > 0 ? fitting[0]!.price : 0;
  const maxPrice = cheapestPrice * config.maxPriceFactor;
  const n = sortedTypes.length;
  const shareByIndex = new Float64Array(n);
  const usableByIndex = new Uint8Array(n);
  const shareOf = (t: InstanceType) => t.price * largestFraction(need, typeCapacity(t, config.ramOverhead));
  const cheapestShare = fitting.length > 0 ? shareOf(fitting[0]!) : 0;
  sortedTypes.forEach((t, i) => {
    const share = fitSet.has(t) ? shareOf(t) : Infinity;
    shareByIndex[i] = share;
    // A relative tolerance, so that a share exactly at the bound is not lost to rounding.
    const measure = config.shareRule === 'price' ? (fitSet.has(t) ? t.price : Infinity) : share;
    usableByIndex[i] = measure <= maxPrice * (1 + 1e-9) ? 1 : 0;
  });
  // A spend cap below the price of every fitting type can never be met: waiting would block the queue
  // behind this container forever (rule 5), so it is unsatisfiable like a container no type fits.
  const unsatisfiable =
    fitting.length === 0
      ? whyNothingFits(c, sortedTypes, candidates, config.ramOverhead)
      : config.maxSpendPerHour !== null && cheapestPrice > config.maxSpendPerHour + 1e-9
        ? `its cheapest fitting type ${fitting[0]!.name} costs ${cheapestPrice}/h; max_spend_per_hour is ${config.maxSpendPerHour}`
        : null;
  return {
    key: shapeKey(c, onDemandOnly),
    need,
    fitting,
    cheapestPrice,
    maxPrice,
    shareByIndex,
    usableByIndex,
    cheapestShare,
    onDemandOnly,
    unsatisfiable,
  };
}

function maxOf(types: InstanceType[], f: (t: InstanceType) => number): InstanceType {
  return types.reduce((best, t) => (f(t) > f(best) ? t : best));
}

/** The reason text for a container no configured type can ever fit, naming the constraint. */
function whyNothingFits(
  c: SnapshotContainer,
  all: InstanceType[],
  candidates: InstanceType[],
  ramOverhead: number,
): string {
  if (all.length === 0) return 'no instance types are configured';
  if (c.instanceTypes !== null) {
    const known = new Set(all.map((t) => t.name));
    if (!c.instanceTypes.some((n) => known.has(n)))
      return `allowed instance types [${c.instanceTypes.join(', ')}] are not configured`;
  }
  if (candidates.length === 0) return 'needs a non-preemptible type; every allowed type is preemptible';
  const overhead = ramOverhead > 0 ? ` (${formatSize(c.ram)} plus ${formatSize(ramOverhead)} overhead)` : '';
  const checks: [boolean, () => string][] = [
    [
      c.ram + ramOverhead > maxOf(candidates, (t) => t.ram).ram,
      () =>
        `needs ${formatSize(c.ram + ramOverhead)} ram${overhead}; largest configured type has ${formatSize(maxOf(candidates, (t) => t.ram).ram)}`,
    ],
    [
      c.vcpus > maxOf(candidates, (t) => t.vcpus).vcpus,
      () => `needs ${c.vcpus} vcpus; largest configured type has ${maxOf(candidates, (t) => t.vcpus).vcpus}`,
    ],
    [
      c.scratch > maxOf(candidates, (t) => t.scratch).scratch,
      () =>
        `needs ${formatSize(c.scratch)} scratch; largest configured type has ${formatSize(maxOf(candidates, (t) => t.scratch).scratch)}`,
    ],
    [
      c.gpus > maxOf(candidates, (t) => t.gpus).gpus,
      () => `needs ${c.gpus} gpus; largest configured type has ${maxOf(candidates, (t) => t.gpus).gpus}`,
    ],
  ];
  for (const [failed, text] of checks) if (failed) return text();
  return (
    `needs ${c.vcpus} vcpus, ${formatSize(c.ram + ramOverhead)} ram, ${formatSize(c.scratch)} scratch and ` +
    `${c.gpus} gpus together; no configured type has all of them`
  );
}
