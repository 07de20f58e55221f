// What a quick placing pass carries out (placingActions, issue 12): on random snapshots, only actions of
// the full pass's plan for the same snapshot — each start onto a ready instance, with the lock of what it
// starts — and never more than an instance's free capacity.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { placingActions } from '../../src/dispatch/dispatcher.js';
import { plan } from '../../src/dispatch/scheduler/plan.js';
import type { Action, Snapshot } from '../../src/dispatch/scheduler/types.js';
import { snapshotArb } from './arbitraries.js';

const ready = (s: Snapshot) => (id: string) =>
  s.instances.some((i) => i.id === id && (i.state === 'idle' || i.state === 'running'));

/** Per instance, what its containers and the placed ones take beyond its type's size (empty: nothing). */
function overCommitted(s: Snapshot, placed: Action[]): string[] {
  const over: string[] = [];
  const byId = new Map(s.containers.map((c) => [c.id, c]));
  for (const inst of s.instances) {
    const type = s.instanceTypes.find((t) => t.name === inst.type);
    if (!type) continue;
    const on = [
      ...inst.containers,
      ...placed.flatMap((a) => (a.op === 'start' && a.instance === inst.id ? [a.container] : [])),
    ].map((id) => byId.get(id)!);
    if (on.some((c) => c.opportunistic)) continue; // borrowed room is opportunistic.ts's own rule
    const mcpu = on.reduce((n, c) => n + Math.round(c.vcpus * 1000), 0);
    const ram = on.reduce((n, c) => n + c.ram, 0);
    const max = s.config.maxContainersPerInstance;
    if (mcpu > type.vcpus * 1000 || ram > type.ram - s.config.ramOverhead || (max > 0 && on.length > max))
      over.push(`${inst.id}: ${on.length} containers, ${mcpu} mcpu, ${ram} bytes on ${type.name}`);
  }
  return over;
}

describe('placingActions', () => {
  it('are actions of the full plan for the same snapshot, onto ready instances, within free capacity', () => {
    let placedSome = 0;
    fc.assert(
      fc.property(snapshotArb, (s) => {
        const full = plan(s);
        const quick = placingActions(full, ready(s));
        const fullKeys = new Set(full.actions.map((a) => JSON.stringify(a)));
        for (const a of quick) expect(fullKeys.has(JSON.stringify(a)), JSON.stringify(a)).toBe(true);
        const starts = new Set(quick.flatMap((a) => (a.op === 'start' ? [a.container] : [])));
        for (const a of quick) {
          expect(['lock', 'start']).toContain(a.op);
          if (a.op === 'lock')
            expect(starts.has(a.container), `lock of ${a.container} without its start`).toBe(true);
          if (a.op === 'start') expect(ready(s)(a.instance), `start on ${a.instance}`).toBe(true);
        }
        // Every start of the full plan onto a ready instance is in the quick pass too.
        for (const a of full.actions)
          if (a.op === 'start' && ready(s)(a.instance)) expect(starts.has(a.container)).toBe(true);
        expect(overCommitted(s, quick)).toEqual([]);
        if (starts.size > 0) placedSome++;
      }),
      { numRuns: 500, seed: 12 },
    );
    // The property held on snapshots where something was placed, not only on empty ones.
    expect(placedSome).toBeGreaterThan(20);
  });
});
