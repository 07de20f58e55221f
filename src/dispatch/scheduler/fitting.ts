// Which instance types a container can use (DESIGN §6.2 rule 2). Containers are grouped by "shape"
// (resources, preemptibility, allow-list) so the type search runs once per shape, not once per container:
// a queue of a million containers usually has a few dozen shapes.
import { formatSize } from '../../model/units.js';
import type { InstanceType } from '../../model/types.js';
import { containerNeed, typeCapacity, fits, type Res } from './resources.js';
import type { SnapshotContainer } from './types.js';

/** Everything the scheduler needs to know about one container shape. */
export interface Shape {
  key: string;
  need: Res;
  /** Types that fit, cheapest first (ties: more ram, more vcpus, name). */
  fitting: InstanceType[];
  /** The price of the cheapest fitting type; existing instances are usable up to maxPrice. */
  cheapestPrice: number;
  maxPrice: number;
  /** Names of types this shape may use on existing instances (fit and within the price factor). */
  usable: Set<string>;
  /** The same by position in the sorted type list (slot.typeIndex): a byte lookup per slot. */
  usableByIndex: Uint8Array;
  /** Why no type can ever fit, or null. */
  unsatisfiable: string | null;
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

  constructor(private readonly build: (c: SnapshotContainer) => Shape) {}

  get(c: SnapshotContainer): Shape {
    const k = Math.floor(c.ram / 1048576);
    let list = this.byRam.get(k);
    if (list === undefined) {
      list = [];
      this.byRam.set(k, list);
    }
    for (const e of list) if (sameShape(e.c, c)) return e.shape;
    const shape = this.build(c);
    list.push({ c, shape });
    return shape;
  }
}

function sameShape(a: SnapshotContainer, b: SnapshotContainer): boolean {
  if (a.ram !== b.ram || a.vcpus !== b.vcpus || a.scratch !== b.scratch || a.gpus !== b.gpus) return false;
  if (a.preemptible !== b.preemptible) return false;
  const x = a.instanceTypes;
  const y = b.instanceTypes;
  if (x === y) return true;
  if (x === null || y === null || x.length !== y.length) return false;
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
  return true;
}

export function shapeKey(c: SnapshotContainer): string {
  const allow = c.instanceTypes === null ? '*' : c.instanceTypes.join(',');
  return `${c.vcpus}|${c.ram}|${c.scratch}|${c.gpus}|${c.preemptible ? 1 : 0}|${allow}`;
}

/** A preemptible container may use either kind of type; a non-preemptible one only non-preemptible types. */
function kindAllowed(c: SnapshotContainer, t: InstanceType): boolean {
  return c.preemptible || !t.preemptible;
}

/** Builds the shape of a container; `sortedTypes` must already be in compareTypes order. */
export function buildShape(
  c: SnapshotContainer,
  sortedTypes: InstanceType[],
  ramOverhead: number,
  maxPriceFactor: number,
  maxSpendPerHour: number | null = null,
): Shape {
  const need = containerNeed(c);
  const allow = c.instanceTypes === null ? null : new Set(c.instanceTypes);
  const candidates = sortedTypes.filter((t) => (allow === null || allow.has(t.name)) && kindAllowed(c, t));
  const fitting = candidates.filter((t) => fits(need, typeCapacity(t, ramOverhead)));
  const cheapestPrice = fitting.length > 0 ? fitting[0]!.price : 0;
  const maxPrice = cheapestPrice * maxPriceFactor;
  const usable = new Set(fitting.filter((t) => t.price <= maxPrice).map((t) => t.name));
  const usableByIndex = new Uint8Array(sortedTypes.length);
  sortedTypes.forEach((t, i) => (usableByIndex[i] = usable.has(t.name) ? 1 : 0));
  // A spend cap below the price of every fitting type can never be met: waiting would block the queue
  // behind this container forever (rule 5), so it is unsatisfiable like a container no type fits.
  const unsatisfiable =
    fitting.length === 0
      ? whyNothingFits(c, sortedTypes, candidates, ramOverhead)
      : maxSpendPerHour !== null && cheapestPrice > maxSpendPerHour + 1e-9
        ? `its cheapest fitting type ${fitting[0]!.name} costs ${cheapestPrice}/h; max_spend_per_hour is ${maxSpendPerHour}`
        : null;
  return { key: shapeKey(c), need, fitting, cheapestPrice, maxPrice, usable, usableByIndex, unsatisfiable };
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
