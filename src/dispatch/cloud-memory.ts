// What the cloud told us recently and the scheduler must respect (DESIGN §6.2 rule 6): a quota error makes
// the current count the cap until an instance goes away or a TTL passes; a capacity error pauses a type
// (or all) for a TTL; a rate limit forbids creates until the earliest retry.
import { CapacityError, QuotaError, RateLimitError } from '../cloud/errors.js';
import type { InstanceType } from '../model/types.js';
import type { CloudState } from './scheduler/types.js';

export interface CloudMemoryOptions {
  capacityTtlMs: number;
  quotaTtlMs: number;
}

export class CloudMemory {
  private quota: { max: number; until: number } | null = null;
  private readonly unavailable = new Map<string, number>(); // type name or '*' → until (ms)
  private rateLimitedUntil = 0;

  constructor(private readonly opts: CloudMemoryOptions) {}

  /** Learns from a failed create of `type` while `liveCount` instances exist. Returns a description. */
  learn(err: unknown, type: InstanceType, types: InstanceType[], liveCount: number, nowMs: number): string {
    if (err instanceof QuotaError) {
      const max = err.limit.instances ?? liveCount;
      this.quota = { max, until: nowMs + this.opts.quotaTtlMs };
      return `quota: at most ${max} instances for now`;
    }
    if (err instanceof CapacityError) {
      const until = nowMs + this.opts.capacityTtlMs;
      if (err.scope === 'all') this.unavailable.set('*', until);
      else if (err.scope === 'quota-group' && err.subject) {
        // Types of the same family share a group: e.g. "m5" for m5.large, m5.xlarge.
        for (const t of types)
          if (t.providerType.split('.')[0] === err.subject || t.name === err.subject)
            this.unavailable.set(t.name, until);
        this.unavailable.set(type.name, until);
      } else this.unavailable.set(type.name, until);
      return `capacity: ${type.name} unavailable for ${Math.round(this.opts.capacityTtlMs / 1000)}s`;
    }
    if (err instanceof RateLimitError) {
      this.rateLimitedUntil = Math.max(this.rateLimitedUntil, err.earliestRetry.getTime());
      return `rate limited until ${err.earliestRetry.toISOString()}`;
    }
    return `create failed: ${(err as Error).message}`;
  }

  /** An instance went away: a quota cap learned from the count no longer holds. */
  instanceGone(): void {
    this.quota = null;
  }

  state(types: InstanceType[], nowMs: number): CloudState {
    if (this.quota && this.quota.until <= nowMs) this.quota = null;
    for (const [k, until] of this.unavailable) if (until <= nowMs) this.unavailable.delete(k);
    const all = this.unavailable.has('*');
    return {
      quotaMaxInstances: this.quota?.max ?? null,
      unavailableTypes: all ? types.map((t) => t.name) : [...this.unavailable.keys()].sort(),
      rateLimitedUntil: this.rateLimitedUntil > nowMs ? new Date(this.rateLimitedUntil) : null,
    };
  }
}
