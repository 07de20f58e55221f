// How a cloud bills an instance's life: at least a minimum, then whole increments, each started one paid
// in full. EC2 (Linux, on demand and spot) bills at least 60 s, then per second; GCE per second after a
// minute; providers that bill hourly have a one-hour increment. One rule, used by the simulator's cost
// and open to the scheduler's shutdown decisions.

/** A provider's billing rule; both in ms. */
export interface BillingRule {
  /** The least an instance is billed, however briefly it lived. */
  minimumMs: number;
  /** Past the minimum, lifetimes are rounded up to whole increments. */
  incrementMs: number;
}

/** Per started second, no minimum. */
export const PER_SECOND: BillingRule = { minimumMs: 0, incrementMs: 1000 };

/** EC2: at least 60 s, then per second. */
export const EC2_BILLING: BillingRule = { minimumMs: 60_000, incrementMs: 1000 };

/** The billed time (ms) of an instance that lived `lifeMs`. */
export function billedMs(lifeMs: number, rule: BillingRule): number {
  const rounded = Math.ceil(Math.max(0, lifeMs) / rule.incrementMs) * rule.incrementMs;
  return Math.max(rule.minimumMs, rounded);
}
