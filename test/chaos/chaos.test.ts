// The chaos test (issue "Nothing lost, nothing run twice"): 500 containers through the real dispatcher
// and store on a PostgreSQL server of the test's own, with the sim cloud's faults turned on, the
// dispatcher killed -9 three times and PostgreSQL restarted once. See src/chaos/run.ts.
import { describe, expect, it } from 'vitest';
import { runChaos } from '../../src/chaos/run.js';

describe('chaos', () => {
  // One run, one test: the checks below all read its result, so none of them can run without it.
  it(
    '500 containers through every fault: every kind of fault injected, every check holds',
    { timeout: 300_000 },
    async () => {
      const result = await runChaos({ containers: 500, seed: 1, wallLimitMs: 240_000 });
      expect(result.checks.length, 'number of checks').toBeGreaterThanOrEqual(10);

      // Every kind of fault was injected (a run that injects nothing would pass every check).
      const i = result.injected;
      const injected = (kind: string) => expect.soft(i[kind] ?? 0, `injected: ${kind}`);
      injected('non-zero exits').toBeGreaterThan(0);
      injected('containers killed by agent crashes').toBeGreaterThan(0);
      injected('instances that never booted').toBeGreaterThan(0);
      injected('cloud create errors (CloudApiError)').toBeGreaterThan(0);
      injected('cloud create errors (CapacityError)').toBeGreaterThan(0);
      injected('cloud create errors (QuotaError)').toBeGreaterThan(0);
      injected('cloud destroy errors (CloudApiError)').toBeGreaterThan(0);
      injected('dispatcher kills').toBe(3);
      injected('PostgreSQL restarts').toBe(1);
      // Two of the kills land in the middle of a pass, at the armed calls.
      expect
        .soft(
          result.faults.filter((f) => /killed mid-pass/.test(f)),
          'kills in the middle of a pass',
        )
        .toHaveLength(2);

      // Every check holds.
      for (const c of result.checks) expect.soft(c.ok, `check "${c.name}": ${c.detail}`).toBe(true);
      expect(result.ok, 'the run as a whole').toBe(true);
    },
  );

  it(
    'the stall check bites: a dispatcher frozen for 10 minutes of virtual time is reported',
    { timeout: 300_000 },
    async () => {
      const frozen = await runChaos({
        containers: 100,
        seed: 3,
        wallLimitMs: 240_000,
        freeze: { atShare: 0.2, forMs: 600_000 },
      });
      expect(frozen.faults.some((f) => /frozen for 600 s/.test(f))).toBe(true);
      const stall = frozen.checks.find((c) => c.name.startsWith('no stall'));
      expect(stall?.ok, stall?.detail).toBe(false);
      const seconds = Number(/longest ([\d.]+) s/.exec(stall!.detail)?.[1]);
      expect(seconds).toBeGreaterThan(10); // the limit; how much more depends on the work running when it froze
      // Frozen, not broken: once it thaws, every request still ends as it should.
      const finished = frozen.checks.find((c) => /every request reaches Final/i.test(c.name));
      expect(finished?.ok, finished?.detail).toBe(true);
    },
  );
});
