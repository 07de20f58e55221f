// Batch packing (DESIGN §6.2 rule 3, issue 14): the instances a pass creates are chosen together.
//
// A container that finds no room anywhere opens a *planned* instance of its cheapest type it may create.
// Containers after it in queue order join it while it has room; when it has none, it may grow into a
// larger type to take one more container, if that is no worse than packing them on instances of their
// own: the added price is at most what the newcomer and the containers of its shape still waiting behind
// it that the larger type would also hold cost on their cheapest type (their share of it). With prices in
// proportion to size (as clouds price a family), four 1-vcpu containers become one 4-vcpu instance instead
// of four 1-vcpu ones: the same price, three boots fewer; three of them become a 2-vcpu and a 1-vcpu
// instance, not a 4-vcpu one with a vcpu paid for and unused. Like Karpenter's in-flight node claims, a
// planned instance keeps the types every container on it may use and ends up as the cheapest of them that
// holds them all. Limits are counted as it grows: one instance, the price of its current type, and
// per-type caps (limits.ts).
import type { InstanceType } from '../../model/types.js';
import type { Slot } from './capacity.js';
import type { Shape } from './fitting.js';
import type { Limits } from './limits.js';
import { add, fits, subtract, typeCapacity, type Res } from './resources.js';
import type { SnapshotContainer } from './types.js';

/** What a planned instance holds. */
export interface Bin {
  /** The sum of what its containers need. */
  total: Res;
  /** Types every container on it may use (shape.usableByIndex, ANDed), by type index. */
  allowed: Uint8Array;
  members: { c: SnapshotContainer; shape: Shape }[];
}

/** A planned instance of `type` for nobody yet (placement adds the first container). */
export function openBin(
  id: string,
  type: InstanceType,
  typeIndex: number,
  typeCount: number,
  ramOverhead: number,
  unavailable: (name: string) => boolean,
  sortedTypes: InstanceType[],
): Slot {
  const allowed = new Uint8Array(typeCount);
  sortedTypes.forEach((t, i) => (allowed[i] = unavailable(t.name) ? 0 : 1));
  allowed[typeIndex] = 1;
  return {
    id,
    type,
    typeIndex,
    state: 'new',
    ready: false,
    free: typeCapacity(type, ramOverhead),
    count: 0,
    occupants: 0,
    createFor: [],
    bin: { total: { mcpu: 0, ram: 0, scratch: 0, gpus: 0 }, allowed, members: [] },
    used: false,
    reservedBelow: 0,
  };
}

/**
 * The type a planned slot would grow into to take `shape` (its index), or -1: the cheapest type every
 * container on it and the newcomer may use that holds them all and the limits allow, taken only when that
 * is no worse than instances of their own (see the file comment). `alikeBehind` counts the containers of
 * the same shape still waiting behind the newcomer.
 */
export function growTarget(
  slot: Slot,
  shape: Shape,
  alikeBehind: number,
  sortedTypes: InstanceType[],
  ramOverhead: number,
  limits: Limits,
): number {
  const bin = slot.bin!;
  const total = { ...bin.total };
  add(total, shape.need);
  for (let j = 0; j < sortedTypes.length; j++) {
    if (j === slot.typeIndex || bin.allowed[j] !== 1 || shape.usableByIndex[j] !== 1) continue;
    const t = sortedTypes[j]!;
    const cap = typeCapacity(t, ramOverhead);
    if (!fits(total, cap)) continue;
    // Types come cheapest first: the first that fits (and the limits allow) is the one it would become.
    if (!limits.canReplace(slot.type, t)) continue;
    subtract(cap, total);
    const alike = 1 + Math.min(alikeBehind, copiesFitting(shape.need, cap));
    return t.price - slot.type.price <= alike * shape.cheapestShare * (1 + 1e-9) ? j : -1;
  }
  return -1;
}

/** How many more containers needing `need` fit in `free`. */
function copiesFitting(need: Res, free: Res): number {
  let n = Infinity;
  if (need.mcpu > 0) n = Math.min(n, Math.floor(free.mcpu / need.mcpu));
  if (need.ram > 0) n = Math.min(n, Math.floor(free.ram / need.ram));
  if (need.scratch > 0) n = Math.min(n, Math.floor(free.scratch / need.scratch));
  if (need.gpus > 0) n = Math.min(n, Math.floor(free.gpus / need.gpus));
  return n === Infinity ? 0 : n;
}

/** Puts a container on a planned slot, growing it into type `growTo` first when that is not -1. */
export function joinBin(
  slot: Slot,
  c: SnapshotContainer,
  shape: Shape,
  growTo: number,
  sortedTypes: InstanceType[],
  ramOverhead: number,
  limits: Limits,
): void {
  const bin = slot.bin!;
  if (growTo >= 0) retype(slot, growTo, sortedTypes, ramOverhead, limits);
  add(bin.total, shape.need);
  subtract(slot.free, shape.need);
  for (let j = 0; j < bin.allowed.length; j++) if (shape.usableByIndex[j] !== 1) bin.allowed[j] = 0;
  bin.members.push({ c, shape });
}

/**
 * Takes a container off a planned slot (rule 5 gave its place to a higher-priority one): the types the
 * rest may use are recomputed and the slot becomes the cheapest of them that holds the rest.
 */
export function leaveBin(
  slot: Slot,
  c: SnapshotContainer,
  sortedTypes: InstanceType[],
  ramOverhead: number,
  limits: Limits,
  unavailable: (name: string) => boolean,
): void {
  const bin = slot.bin!;
  bin.members = bin.members.filter((m) => m.c !== c);
  bin.total = { mcpu: 0, ram: 0, scratch: 0, gpus: 0 };
  sortedTypes.forEach((t, i) => (bin.allowed[i] = unavailable(t.name) && i !== slot.typeIndex ? 0 : 1));
  for (const m of bin.members) {
    add(bin.total, m.shape.need);
    for (let j = 0; j < bin.allowed.length; j++) if (m.shape.usableByIndex[j] !== 1) bin.allowed[j] = 0;
  }
  const cheapest = cheapestHolding(slot, sortedTypes, ramOverhead, limits);
  if (cheapest >= 0 && cheapest !== slot.typeIndex) retype(slot, cheapest, sortedTypes, ramOverhead, limits);
  else {
    slot.free = typeCapacity(slot.type, ramOverhead);
    subtract(slot.free, bin.total);
  }
}

/** The cheapest type the slot's containers may all use that holds them and the limits allow, or -1. */
function cheapestHolding(
  slot: Slot,
  sortedTypes: InstanceType[],
  ramOverhead: number,
  limits: Limits,
): number {
  const bin = slot.bin!;
  for (let j = 0; j < sortedTypes.length; j++) {
    if (bin.allowed[j] !== 1 && j !== slot.typeIndex) continue;
    const t = sortedTypes[j]!;
    if (!fits(bin.total, typeCapacity(t, ramOverhead))) continue;
    if (j === slot.typeIndex || limits.canReplace(slot.type, t)) return j;
  }
  return -1;
}

function retype(
  slot: Slot,
  to: number,
  sortedTypes: InstanceType[],
  ramOverhead: number,
  limits: Limits,
): void {
  const t = sortedTypes[to]!;
  limits.replace(slot.type, t);
  slot.type = t;
  slot.typeIndex = to;
  slot.free = typeCapacity(t, ramOverhead);
  subtract(slot.free, slot.bin!.total);
}
