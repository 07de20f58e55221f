// The billing rule (src/model/billing.ts) and its SQL form for the cost query: both give the same billed
// time, on hand-picked lives and on random ones (real PostgreSQL).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { billedEndSql, billedMs, billingRuleOf, EC2_BILLING, PER_SECOND } from '../../src/model/billing.js';
import { testDb } from '../helpers/db.js';

describe('billing', async () => {
  const { pool } = await testDb();

  it('bills at least the minimum, then whole increments', () => {
    expect(billedMs(20_000, EC2_BILLING)).toBe(60_000);
    expect(billedMs(90_400, EC2_BILLING)).toBe(91_000);
    expect(billedMs(0, PER_SECOND)).toBe(0);
    expect(billedMs(3_700_000, { minimumMs: 0, incrementMs: 3_600_000 })).toBe(7_200_000);
    expect(billingRuleOf({ minBillingPeriodMs: 60_000, billingPeriodMs: 0 })).toEqual(EC2_BILLING);
    expect(billingRuleOf({ minBillingPeriodMs: 0, billingPeriodMs: 3_600_000 })).toEqual({
      minimumMs: 0,
      incrementMs: 3_600_000,
    });
  });

  it('the SQL form gives the billed end billedMs gives', async () => {
    const created = new Date('2026-01-01T00:00:00Z');
    const cases = fc.sample(
      fc.record({
        life: fc.integer({ min: 0, max: 10_000_000 }),
        minimum: fc.constantFrom(0, 60_000, 600_000),
        increment: fc.constantFrom(1, 1000, 60_000, 3_600_000),
      }),
      { numRuns: 200, seed: 1 },
    );
    const r = await pool.query(
      `SELECT ${billedEndSql('$1::timestamptz', '$1::timestamptz + make_interval(secs => u.life / 1000.0)', 'u.minimum', 'u.increment')} AS e
       FROM unnest($2::int8[], $3::int8[], $4::int8[]) WITH ORDINALITY AS u(life, minimum, increment, n) ORDER BY n`,
      [created, cases.map((c) => c.life), cases.map((c) => c.minimum), cases.map((c) => c.increment)],
    );
    const got = r.rows.map((row: { e: Date }) => row.e.getTime() - created.getTime());
    const want = cases.map((c) => billedMs(c.life, { minimumMs: c.minimum, incrementMs: c.increment }));
    expect(got).toEqual(want);
  });
});
