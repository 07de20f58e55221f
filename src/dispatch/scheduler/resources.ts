// Resource arithmetic for packing. CPUs are kept in integer thousandths so that repeated additions and
// subtractions of fractional CPUs never drift (0.1 + 0.2 must fit in 0.3).
import type { InstanceType } from '../../model/types.js';
import type { SnapshotContainer } from './types.js';

/** A resource vector with CPUs in thousandths. */
export interface Res {
  mcpu: number;
  ram: number;
  scratch: number;
  gpus: number;
}

/** What a container asks for. */
export function containerNeed(c: SnapshotContainer): Res {
  return { mcpu: Math.round(c.vcpus * 1000), ram: c.ram, scratch: c.scratch, gpus: c.gpus };
}

/** What an empty instance of this type offers to containers (its ram minus the configured overhead). */
export function typeCapacity(t: InstanceType, ramOverhead: number): Res {
  return { mcpu: Math.round(t.vcpus * 1000), ram: t.ram - ramOverhead, scratch: t.scratch, gpus: t.gpus };
}

export function fits(need: Res, free: Res): boolean {
  return (
    need.mcpu <= free.mcpu && need.ram <= free.ram && need.scratch <= free.scratch && need.gpus <= free.gpus
  );
}

export function subtract(into: Res, r: Res): void {
  into.mcpu -= r.mcpu;
  into.ram -= r.ram;
  into.scratch -= r.scratch;
  into.gpus -= r.gpus;
}

export function add(into: Res, r: Res): void {
  into.mcpu += r.mcpu;
  into.ram += r.ram;
  into.scratch += r.scratch;
  into.gpus += r.gpus;
}

/**
 * The largest fraction of `cap` that `need` takes, over every resource: a container's share of an
 * instance (DESIGN §6.2 rule 3). Infinity when it needs a resource the instance does not have.
 */
export function largestFraction(need: Res, cap: Res): number {
  return Math.max(
    fraction(need.mcpu, cap.mcpu),
    fraction(need.ram, cap.ram),
    fraction(need.scratch, cap.scratch),
    fraction(need.gpus, cap.gpus),
  );
}

function fraction(need: number, cap: number): number {
  if (need <= 0) return 0;
  return cap > 0 ? need / cap : Infinity;
}
