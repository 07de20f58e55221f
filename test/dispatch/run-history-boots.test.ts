// The run history's boot samples (run-history.ts observeBoots) against a model that keeps, as the history
// did before session 9, the set of every id of the last pass: the same samples, after every step of
// seeded random sequences of pools (instances booting, ready, gone, back, repeated).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { RunHistory, SAMPLES } from '../../src/dispatch/run-history.js';
import { estimateMs } from '../../src/dispatch/scheduler/durations.js';
import type { SnapshotInstance } from '../../src/dispatch/scheduler/types.js';
import { inst, NOW } from './builders.js';

/** The boots a pass records, computed from the whole previous pass (the definition). */
class Model {
  private seen: Set<string> | null = null;
  private readonly booting = new Set<string>();
  readonly boots: number[] = [];

  observe(instances: readonly SnapshotInstance[]): boolean {
    let changed = false;
    const seen = new Set<string>();
    for (const i of instances) {
      seen.add(i.id);
      const booting = i.state === 'booting' || i.state === 'unknown';
      const ready = i.state === 'idle' || i.state === 'running';
      const fresh = this.seen !== null && !this.seen.has(i.id);
      if (booting) this.booting.add(i.id);
      else if (ready && (fresh || this.booting.has(i.id))) {
        this.boots.push(i.stateSince.getTime() - i.createdAt.getTime());
        changed = true;
      }
      if (!booting) this.booting.delete(i.id);
    }
    for (const id of this.booting) if (!seen.has(id)) this.booting.delete(id);
    this.seen = seen;
    return changed;
  }
}

const states = ['booting', 'unknown', 'idle', 'running', 'shutdown'] as const;
const poolArb = fc.array(
  fc.record({ id: fc.nat({ max: 12 }), state: fc.constantFrom(...states), bootS: fc.nat({ max: 500 }) }),
  { maxLength: 10 },
);

describe('run history boots', () => {
  it('records the boots a pass sees as the set of the last pass says, after every step', () => {
    let samples = 0;
    fc.assert(
      fc.property(fc.array(poolArb, { minLength: 1, maxLength: 40 }), (passes) => {
        const history = new RunHistory();
        const model = new Model();
        let last: ReturnType<RunHistory['observe']> = undefined;
        for (const [k, pool] of passes.entries()) {
          const instances = pool.map((p) =>
            inst(`i-${p.id}`, 'small', p.state, {
              createdAt: NOW,
              stateSince: new Date(NOW.getTime() + p.bootS * 1000 + k),
            }),
          );
          const changed = model.observe(instances);
          const e = history.observe([], instances, NOW.getTime() + k);
          // A new estimates object exactly when a boot was recorded (nothing else changes here).
          expect(e !== last).toBe(changed);
          expect(e?.bootMs ?? null).toBe(estimateMs(model.boots.slice(-SAMPLES)));
          last = e;
        }
        samples += model.boots.length;
      }),
      { numRuns: 400, seed: 9 },
    );
    expect(samples).toBeGreaterThan(1000);
  });
});
