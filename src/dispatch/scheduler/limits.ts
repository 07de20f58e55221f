// Instance limits (DESIGN §6.2 rule 6). Counts cover live and booting instances, including the ones
// this pass decides to create, and those shutting down until the cloud confirms them gone.
import type { InstanceType } from '../../model/types.js';
import type { Snapshot } from './types.js';

/** Why a create cannot happen now. `global` limits trigger rule 5 (priority under limits). */
export type LimitBlock =
  | { kind: 'global'; text: string; what: 'count' | 'spend' }
  | { kind: 'rate'; text: string }
  | { kind: 'type'; text: string };

/** What a list of instances adds to the limits (Limits.totals), for a pass to add again (kept-pool.ts). */
export interface LimitTotals {
  readonly count: number;
  readonly spend: number;
  readonly perType: ReadonlyMap<string, number>;
}

/** Running totals the pass updates as it creates instances. */
export class Limits {
  count = 0;
  spend = 0;
  /** Bumped on every add, so callers can cache decisions that depend on the totals. */
  version = 0;
  private readonly perType = new Map<string, number>();
  private readonly unavailable: Set<string>;

  constructor(private readonly snap: Snapshot) {
    this.unavailable = new Set(snap.cloud.unavailableTypes);
  }

  /** Records an instance (existing or planned) against the limits. `price` is 0 for unconfigured types. */
  add(typeName: string, price: number): void {
    this.count++;
    this.version++;
    this.spend += price;
    this.perType.set(typeName, (this.perType.get(typeName) ?? 0) + 1);
  }

  /** The totals added so far. */
  totals(): LimitTotals {
    return { count: this.count, spend: this.spend, perType: new Map(this.perType) };
  }

  /**
   * Adds totals taken from other limits, as if their instances were added one by one. Limits that nothing
   * was added to yet get the same spend, to the bit, as the adds gave (0 + x is x; in another order a sum
   * of prices may differ in its last bit).
   */
  addTotals(t: LimitTotals): void {
    this.count += t.count;
    this.version += t.count;
    this.spend += t.spend;
    for (const [name, n] of t.perType) this.perType.set(name, (this.perType.get(name) ?? 0) + n);
  }

  /** Whether an instance planned as `from` may become a `to` instead (per-type cap, spend cap). */
  canReplace(from: InstanceType, to: InstanceType): boolean {
    if (from.name === to.name) return true;
    const cap = this.snap.config.maxInstancesPerType[to.name];
    if (cap !== undefined && (this.perType.get(to.name) ?? 0) >= cap) return false;
    const { maxSpendPerHour } = this.snap.config;
    return maxSpendPerHour === null || this.spend - from.price + to.price <= maxSpendPerHour + 1e-9;
  }

  /** Records that an instance planned as `from` becomes a `to`. */
  replace(from: InstanceType, to: InstanceType): void {
    if (from.name === to.name) return;
    this.version++;
    this.spend += to.price - from.price;
    this.perType.set(from.name, (this.perType.get(from.name) ?? 0) - 1);
    this.perType.set(to.name, (this.perType.get(to.name) ?? 0) + 1);
  }

  isUnavailable(typeName: string): boolean {
    return this.unavailable.has(typeName);
  }

  /** Null when another instance of this type fits under its per-type cap, else the reason. */
  typeCapped(t: InstanceType): string | null {
    const cap = this.snap.config.maxInstancesPerType[t.name];
    if (cap === undefined || (this.perType.get(t.name) ?? 0) < cap) return null;
    return `max_instances_per_type ${t.name}=${cap} reached`;
  }

  /** Whether one more instance of type `t` may be created now (per-type caps are checked separately). */
  check(t: InstanceType): LimitBlock | null {
    const { config, cloud, now } = this.snap;
    if (cloud.rateLimitedUntil !== null && now.getTime() < cloud.rateLimitedUntil.getTime())
      return {
        kind: 'rate',
        text: `cloud rate limit: no create before ${cloud.rateLimitedUntil.toISOString()}`,
      };
    if (config.maxInstances !== null && this.count + 1 > config.maxInstances)
      return { kind: 'global', what: 'count', text: `max_instances=${config.maxInstances} reached` };
    if (cloud.quotaMaxInstances !== null && this.count + 1 > cloud.quotaMaxInstances)
      return {
        kind: 'global',
        what: 'count',
        text: `cloud quota of ${cloud.quotaMaxInstances} instances reached`,
      };
    // A small tolerance so that prices like 0.1 + 0.2 do not exceed a cap of 0.3 by rounding.
    if (config.maxSpendPerHour !== null && this.spend + t.price > config.maxSpendPerHour + 1e-9)
      return {
        kind: 'global',
        what: 'spend',
        text:
          `max_spend_per_hour=${config.maxSpendPerHour} reached ` +
          `(${round(this.spend)}/h in use; ${t.name} costs ${t.price}/h)`,
      };
    return null;
  }
}

function round(x: number): number {
  return Math.round(x * 1e6) / 1e6;
}
