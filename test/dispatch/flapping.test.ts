// Rule 1: a plan applied and re-planned must not lock and unlock the same container back and forth.
// Thirty passes in a row through applyPlan (the act layer and agents, simulated), at a limit so that
// most containers wait.
import { describe, expect, it } from 'vitest';
import { seededRng } from '../../src/model/clock.js';
import { plan } from '../../src/dispatch/scheduler/plan.js';
import type { Snapshot } from '../../src/dispatch/scheduler/types.js';
import { applyPlan, ctr, NOW, snap } from './builders.js';

interface Counts {
  locks: Map<string, number>;
  unlocks: Map<string, number>;
  started: Set<string>;
}

/** Runs `passes` passes; Running containers finish `runPasses` passes after they started. */
function run(
  initial: Snapshot,
  passes: number,
  runPasses: number,
  arrivals: (pass: number) => ReturnType<typeof ctr>[] = () => [],
): Counts {
  const counts: Counts = { locks: new Map(), unlocks: new Map(), started: new Set() };
  const runningSince = new Map<string, number>();
  const created = { n: 0 };
  let s = initial;
  for (let pass = 0; pass < passes; pass++) {
    s = { ...s, containers: [...s.containers, ...arrivals(pass)] };
    const p = plan(s);
    for (const a of p.actions) {
      if (a.op === 'lock') counts.locks.set(a.container, (counts.locks.get(a.container) ?? 0) + 1);
      if (a.op === 'unlock') counts.unlocks.set(a.container, (counts.unlocks.get(a.container) ?? 0) + 1);
      if (a.op === 'start') counts.started.add(a.container);
    }
    s = applyPlan(s, p, { stepMs: 10_000, bootMs: 30_000 }, created);
    for (const c of s.containers)
      if (c.state === 'Running' && !runningSince.has(c.id)) runningSince.set(c.id, pass);
    const done = new Set(
      [...runningSince].filter(([, since]) => pass - since >= runPasses).map(([id]) => id),
    );
    s = { ...s, containers: s.containers.filter((c) => !done.has(c.id)) };
    s = {
      ...s,
      instances: s.instances.map((i) => ({ ...i, containers: i.containers.filter((id) => !done.has(id)) })),
    };
  }
  return counts;
}

function queue(n: number, seed: number, priority: (i: number) => number): ReturnType<typeof ctr>[] {
  const rng = seededRng(seed);
  return Array.from({ length: n }, (_, i) =>
    ctr(`c${String(i).padStart(2, '0')}`, {
      priority: priority(i),
      vcpus: rng() < 0.5 ? 1 : 2,
      // Many equal queue times: the id tie-break must keep the order stable.
      queuedAt: new Date(NOW.getTime() - 60_000 * Math.floor(rng() * 3)),
    }),
  );
}

describe('no flapping', () => {
  it('equal priorities at a limit: over 30 passes no container is ever unlocked or locked twice', () => {
    const s = snap({ config: { maxInstances: 3 }, containers: queue(24, 1, () => 5) });
    const counts = run(s, 30, 4);
    expect(counts.unlocks.size).toBe(0);
    for (const [id, n] of counts.locks) expect(n, id).toBe(1);
    // Work does flow: containers finish and others take their places.
    expect(counts.started.size).toBeGreaterThan(6);
  });

  it('equal priorities under a spend cap with two types: no unlocks, each container locked once', () => {
    const s = snap({ config: { maxSpendPerHour: 0.6 }, containers: queue(24, 2, () => 7) });
    const counts = run(s, 30, 3);
    expect(counts.unlocks.size).toBe(0);
    for (const [id, n] of counts.locks) expect(n, id).toBe(1);
    expect(counts.started.size).toBeGreaterThan(6);
  });

  it('higher-priority arrivals at a limit: a container gives its place back at most once', () => {
    // Low-priority containers lock and wait for booting instances; every third pass a higher-priority
    // container arrives and takes such a place (rule 5). The displaced ones must not bounce.
    const s = snap({ config: { maxInstances: 2 }, containers: queue(16, 3, () => 1) });
    const arrivals = (pass: number) =>
      pass % 3 === 1
        ? [ctr(`h${pass}`, { priority: 2 + pass, queuedAt: new Date(NOW.getTime() + pass * 10_000) })]
        : [];
    const counts = run(s, 30, 5, arrivals);
    expect(counts.unlocks.size).toBeGreaterThan(0);
    for (const [id, n] of counts.unlocks) expect(n, id).toBeLessThanOrEqual(1);
    for (const [id, n] of counts.locks) expect(n, id).toBeLessThanOrEqual(2);
  });
});
