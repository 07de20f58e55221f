// The snapshot's instances kept across passes (snapshot-instances.ts): on random sequences of pool changes,
// the list equals the one built afresh from the pool records, field for field, and an instance whose
// fields did not change keeps its object (what lets a pass skip it).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { PoolInstance } from '../../src/dispatch/pool.js';
import { snapshotInstances } from '../../src/dispatch/snapshot-instances.js';
import type { SnapshotInstance } from '../../src/dispatch/scheduler/types.js';
import type { InstanceState } from '../../src/model/types.js';

const T0 = Date.parse('2026-01-01T00:00:00Z');

function record(k: number): PoolInstance {
  return {
    id: `sim-i-${k}`,
    type: 'c2',
    providerType: 'c2',
    price: 0.1,
    createdAt: new Date(T0 + k),
    state: 'booting',
    stateSince: new Date(T0 + k),
    idleBehavior: 'run',
    nodeId: `n-${k}`,
    containers: [],
    destroyAttemptAt: null,
    preemptible: false,
    interruptionNotice: null,
  };
}

/** What the dispatcher built for every instance, every pass, before the view was kept. */
function fresh(i: PoolInstance): SnapshotInstance {
  return {
    id: i.id,
    type: i.type,
    state: i.state,
    idleBehavior: i.idleBehavior,
    containers: i.containers,
    stateSince: i.stateSince,
    createdAt: i.createdAt,
    ...(i.createdFor && { createdFor: i.createdFor }),
  };
}

type Change =
  | { kind: 'state'; at: number; state: InstanceState; ms: number }
  | { kind: 'idle'; at: number; behavior: 'run' | 'hold' | 'drain' }
  | { kind: 'containers'; at: number; ids: string[] }
  | { kind: 'since'; at: number; ms: number }
  | { kind: 'for'; at: number; ids: string[] }
  | { kind: 'add' }
  | { kind: 'none' };

const at = fc.nat();
const changeArb: fc.Arbitrary<Change> = fc.oneof(
  fc.record({
    kind: fc.constant('state' as const),
    at,
    state: fc.constantFrom<InstanceState>(
      'booting',
      'idle',
      'running',
      'shutdown',
      'destroy_pending',
      'gone',
    ),
    ms: fc.nat(100),
  }),
  fc.record({
    kind: fc.constant('idle' as const),
    at,
    behavior: fc.constantFrom('run' as const, 'hold' as const, 'drain' as const),
  }),
  fc.record({
    kind: fc.constant('containers' as const),
    at,
    ids: fc.array(fc.constantFrom('a', 'b', 'c'), { maxLength: 3 }),
  }),
  fc.record({ kind: fc.constant('since' as const), at, ms: fc.nat(3) }),
  fc.record({
    kind: fc.constant('for' as const),
    at,
    ids: fc.array(fc.constantFrom('a', 'b'), { maxLength: 2 }),
  }),
  fc.constant({ kind: 'add' as const }),
  fc.constant({ kind: 'none' as const }),
);

describe('snapshotInstances', () => {
  it('equals the views built afresh, and keeps the objects of unchanged instances', () => {
    fc.assert(
      fc.property(fc.nat(6), fc.array(changeArb, { maxLength: 40 }), (n, changes) => {
        const pool: PoolInstance[] = Array.from({ length: n }, (_, k) => record(k));
        let last = snapshotInstances(pool);
        let lastOf = new Map(last.map((v) => [v.id, v]));
        for (const ch of changes) {
          const i =
            pool.length === 0 || ch.kind === 'add' || ch.kind === 'none' ? null : pool[ch.at % pool.length]!;
          const touched = i?.id ?? null;
          if (ch.kind === 'add') pool.push(record(pool.length + 100));
          else if (i !== null)
            switch (ch.kind) {
              case 'state':
                i.state = ch.state;
                i.stateSince = new Date(i.stateSince.getTime() + ch.ms);
                break;
              case 'idle':
                i.idleBehavior = ch.behavior;
                break;
              case 'containers':
                // As the dispatcher: the list is replaced, never edited.
                i.containers = ch.ids;
                break;
              case 'since':
                // A new Date of the same time is no change.
                i.stateSince = new Date(i.stateSince.getTime() + ch.ms);
                break;
              case 'for':
                i.createdFor = ch.ids;
                break;
            }
          const now = snapshotInstances(pool);
          expect(now).toEqual(pool.filter((x) => x.state !== 'gone').map(fresh));
          for (const v of now) if (v.id !== touched && lastOf.has(v.id)) expect(v).toBe(lastOf.get(v.id));
          last = now;
          lastOf = new Map(last.map((v) => [v.id, v]));
        }
      }),
      { seed: 12, numRuns: 300 },
    );
  });
});
