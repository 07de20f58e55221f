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

/** The rule a dispatcher's scheduler keys state (`min_billing_period`, `billing_period`; 0: per second). */
export function billingRuleOf(c: { minBillingPeriodMs: number; billingPeriodMs: number }): BillingRule {
  return {
    minimumMs: c.minBillingPeriodMs,
    incrementMs: c.billingPeriodMs > 0 ? c.billingPeriodMs : PER_SECOND.incrementMs,
  };
}

/**
 * billedMs in SQL, for the cost query (src/store/cost.ts): the instant billing ends for an instance created
 * at `created` that lived until `end` (timestamptz expressions), under the rule in the `minimumMs` and
 * `incrementMs` expressions (milliseconds). test/model/billing.test.ts checks it against billedMs.
 */
export function billedEndSql(created: string, end: string, minimumMs: string, incrementMs: string): string {
  const lifeMs = `GREATEST(0, EXTRACT(EPOCH FROM ${end} - ${created}) * 1000)`;
  const billed = `GREATEST(${minimumMs}, CEIL(${lifeMs} / ${incrementMs}) * ${incrementMs})`;
  return `(${created} + make_interval(secs => (${billed})::float8 / 1000))`;
}
