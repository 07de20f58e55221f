// The placing pass a finished container's notification runs (Dispatcher.quickTick, issue 12): on the same
// inputs it places what a full pass places, reads neither nodes nor operator requests, and never places
// beyond an instance's free capacity.
import { describe, expect, it } from 'vitest';
import type { DispatchEvent } from '../../src/dispatch/dispatcher.js';
import type { DispatchQueue } from '../../src/dispatch/ports.js';
import { harness } from './harness.js';

const ONE = { vcpus: 1, ram: '1GiB' };

/** One small instance running the first of four containers; the other three wait (max_instances 1). */
async function oneSlotBusy() {
  const h = await harness({ config: { maxInstances: 1, batchPacking: 'off' } });
  const reads: string[] = [];
  // The real queue, with the reads a quick pass must not make counted.
  const counted = new Proxy(h.queue, {
    get(target, key, receiver) {
      const v: unknown = Reflect.get(target, key, receiver);
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => {
        if (key === 'nodeChanges' || key === 'maxDispatchAttempts') reads.push(key);
        return (v as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  }) as DispatchQueue;
  const d = h.make({ queue: counted });
  // One second apart: the queue's order is theirs in both databases (equal times would fall to the ids).
  const ids: string[] = [];
  for (let i = 0; i < 4; i++) {
    ids.push(...(await h.submit(ONE)));
    await h.advance(1000);
  }
  await h.pass(d);
  await h.advance(30_000); // boots; the agent registers
  await h.pass(d);
  await h.pingAll();
  const states = await Promise.all(ids.map(h.state));
  expect(states.filter((s) => s === 'Running')).toHaveLength(1);
  expect(states.filter((s) => s === 'Queued')).toHaveLength(3);
  return { h, d, ids, reads };
}

const placed = (events: DispatchEvent[]) =>
  events.filter((e) => e.kind === 'container-placed').map((e) => ('container' in e ? e.container : ''));

describe('quick placing pass', () => {
  it('after a finish it places what a full pass places on the same inputs, without reading nodes; nothing while the slot is busy', async () => {
    const quick = await oneSlotBusy();
    const full = await oneSlotBusy();

    // The slot is busy: nothing to place.
    let from = quick.h.events.length;
    quick.reads.length = 0;
    await quick.d.quickTick();
    expect(placed(quick.h.events.slice(from))).toEqual([]);

    // The running container finishes: the quick pass places into its slot, as the full pass does.
    await quick.h.finishAll(0);
    await full.h.finishAll(0);
    from = quick.h.events.length;
    const fullFrom = full.h.events.length;
    quick.reads.length = 0;
    await quick.d.quickTick();
    await full.d.tick();
    const byQuick = placed(quick.h.events.slice(from));
    const byFull = placed(full.h.events.slice(fullFrom));
    expect(byQuick).toHaveLength(1);
    // The same inputs in two databases: the same container (by submission order) placed.
    expect(byQuick.map((id) => quick.ids.indexOf(id))).toEqual(byFull.map((id) => full.ids.indexOf(id)));
    expect(quick.reads, 'the quick pass reads only the containers (and the lease)').toEqual([]);
    expect(await quick.h.state(byQuick[0]!)).toBe('Locked');
    expect(quick.d.instances.size).toBe(1);
    const [inst] = [...quick.d.instances.values()];
    expect(inst!.containers, 'one slot, one container').toEqual(byQuick);
    expect(quick.h.events.filter((e) => e.kind === 'error')).toEqual([]);
  });
});
