// KeptPass keeps the shapes of a pass while the snapshot's type list is the same array (kept.ts): a list
// changed in place would leave them stale, so the list it keeps them for is frozen and a change throws.
import { describe, expect, it } from 'vitest';
import { IncrementalPlanner } from '../../src/dispatch/scheduler/incremental.js';
import { plan } from '../../src/dispatch/scheduler/plan.js';
import { planToJson } from '../../src/dispatch/snapshot-json.js';
import { ctr, snap, type } from './builders.js';

describe('the type list the shapes are kept for', () => {
  it('cannot be changed in place; another array is planned afresh', () => {
    const planner = new IncrementalPlanner();
    const s = snap({ containers: [ctr('c1', { vcpus: 2 })] });
    planner.plan(s);
    const types = s.instanceTypes;
    expect(() => {
      types[1]!.price = 0.01;
    }).toThrow(TypeError);
    expect(() => types.push(type('t8', 8, 32, 0.05))).toThrow(TypeError);
    expect(() => {
      types[0] = type('t1', 1, 2, 0.001);
    }).toThrow(TypeError);
    expect(types.map((t) => t.price)).toEqual([0.1, 0.2, 0.8]);
    // The same change as a new list: the kept planner decides what a pass from scratch does.
    const cheaper = { ...s, instanceTypes: [...types, type('t8', 8, 32, 0.05)] };
    expect(planToJson(planner.plan(cheaper))).toEqual(planToJson(plan(cheaper)));
  });
});
