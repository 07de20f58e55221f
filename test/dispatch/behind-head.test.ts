// consider()'s shortcut behind the head (placement.ts Behind): a container of a shape whose last container
// waited behind the head, of no higher priority and with none of the flags, waits for the same reason
// while the limits, the places that may be taken back and the capacity's cursors are as they were. On
// random snapshots with many containers of each shape, the plans with and without the shortcut are the
// same, byte for byte.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { behindShortcut } from '../../src/dispatch/scheduler/placement.js';
import { plan } from '../../src/dispatch/scheduler/plan.js';
import type { Snapshot, SnapshotContainer } from '../../src/dispatch/scheduler/types.js';
import { planToJson } from '../../src/dispatch/snapshot-json.js';
import { snapshotArb } from './arbitraries.js';

/**
 * The snapshot with each waiting container (Queued, or Locked on no instance) repeated `copies.length`
 * times: other ids, the same shape, each copy Locked or Queued and of its own priority (0: the original's).
 */
function repeated(s: Snapshot, copies: { priority: number; locked: boolean }[]): Snapshot {
  const more = s.containers
    .filter((c) => c.state === 'Queued' || (c.state === 'Locked' && c.instance === null))
    .flatMap((c) =>
      copies.map((k, n): SnapshotContainer => ({
        ...c,
        id: `${c.id}-${n}`,
        state: k.locked ? 'Locked' : 'Queued',
        instance: null,
        priority: k.priority || c.priority,
      })),
    );
  return { ...s, containers: [...s.containers, ...more] };
}

function planned(s: Snapshot, on: boolean): string {
  behindShortcut.on = on;
  try {
    return planToJson(plan(structuredClone(s)));
  } finally {
    behindShortcut.on = true;
  }
}

describe('the shortcut behind the head', () => {
  it('gives the plan the walk gives without it', () => {
    const taken = behindShortcut.taken;
    fc.assert(
      fc.property(
        snapshotArb,
        fc.array(fc.record({ priority: fc.constantFrom(0, 0, 1, 2, 5), locked: fc.boolean() }), {
          minLength: 1,
          maxLength: 8,
        }),
        fc.constantFrom(null, 0, 1, 2),
        fc.boolean(),
        (s, copies, room, plain) => {
          // A head needs a limit: max_instances at the instances there are plus `room` (null: the
          // snapshot's); `plain`: no owner cap and no expected run times (the shortcut is for neither).
          const config = {
            ...s.config,
            ...(room === null ? {} : { maxInstances: s.instances.length + room }),
            ...(plain ? { maxRunningPerUser: null, endAligned: 'off' as const } : {}),
          };
          const limited = { ...s, config };
          const many = repeated(limited, copies);
          expect(planned(many, true)).toBe(planned(many, false));
        },
      ),
      { numRuns: 1500, seed: 17 },
    );
    // The snapshots do reach the shortcut (else this compares the walk with itself).
    expect(behindShortcut.taken - taken).toBeGreaterThan(1000);
  });
});
