// Status writes beside the passes (src/dispatch/status-writer.ts, issue 12): a pass offers its statuses
// and goes on; one write at a time, at most every status_interval and no sooner after the last than twice
// as long as it took; a failed write is an error event, never a failed pass; stop() waits for the write in
// flight. The queue is the real PostgreSQL one; only its group write is held at a gate, as a write of a
// long queue's group holds it for seconds.
import { describe, expect, it } from 'vitest';
import type { PgQueue } from '../../src/dispatch/pg-queue.js';
import { harness } from './harness.js';

/** The harness's queue, whose setWaiting waits until the gate opens (or fails once when told to). */
function gated(queue: PgQueue) {
  let open: (() => void) | null = null;
  let held: Promise<void> | null = null;
  let failNext = false;
  let calls = 0;
  const q = Object.create(queue) as PgQueue;
  q.setWaiting = async (...args: Parameters<PgQueue['setWaiting']>) => {
    calls++;
    if (failNext) {
      failNext = false;
      throw new Error('connection lost (injected)');
    }
    if (held !== null) await held;
    return queue.setWaiting(...args);
  };
  let releasedWhileHeld: boolean | null = null;
  q.release = (...args: Parameters<PgQueue['release']>) => {
    releasedWhileHeld = held !== null;
    return queue.release(...args);
  };
  return {
    queue: q,
    close() {
      held = new Promise<void>((r) => (open = r));
    },
    open() {
      held = null;
      open?.();
    },
    failOnce() {
      failNext = true;
    },
    get calls() {
      return calls;
    },
    /** Whether the gate held writes when the lease was released (null: not released). */
    get releasedWhileHeld() {
      return releasedWhileHeld;
    },
  };
}

/** A dispatcher on the gated queue behind max_instances 1, and two containers submitted: one will wait. */
async function twoWaiting() {
  const h = await harness({ config: { maxInstances: 1 } });
  const gate = gated(h.queue);
  const d = h.make({ queue: gate.queue });
  await h.submit({ vcpus: 1, ram: '1GiB' }, { vcpus: 1, ram: '1GiB' });
  return { h, gate, d };
}

describe('status writes beside the passes', () => {
  it('a pass does not wait for its status write; offers during a write are dropped; the next pass writes the newest', async () => {
    const { h, gate, d } = await twoWaiting();

    gate.close();
    await d.tickAhead();
    const [b] = d.lastPlan!.statuses.waiting.map((x) => x.id);
    // The pass ended; its write waits at the gate: nothing is shown yet for the waiting container.
    expect(d.statusWrites).toBe(1);
    expect(await h.status(b!)).toBeNull();

    // Another pass, with a change, while the write is held: it plans, and offers nothing to write.
    const [c] = await h.submit({ vcpus: 1, ram: '1GiB' });
    await d.tickAhead();
    expect(d.lastPlan!.statuses.waiting.map((x) => x.id)).toContain(c);
    expect(d.statusWrites).toBe(1);

    gate.open();
    await d.settled();
    // The first pass's texts: b waits at position 1; c was not in that pass.
    expect(await h.status(b!)).toMatch(/^queue position 1; /);
    expect(await h.status(c!)).toBeNull();

    // The next pass after status_interval writes the newest statuses.
    await h.advance(3_000);
    await d.tickAhead();
    await d.settled();
    expect(d.statusWrites).toBe(2);
    expect(await h.status(c!)).toMatch(/^queue position [12]; /);
    await d.stop();
  });

  it('after a write that took d, the next starts no sooner than 2 × d after it ended', async () => {
    const { h, gate, d } = await twoWaiting();

    gate.close();
    await d.tickAhead();
    // The write takes 10 s of the dispatcher's clock.
    await h.advance(10_000);
    gate.open();
    await d.settled();
    expect(d.statusWrites).toBe(1);

    // A change 15 s after the write ended (status_interval, 2 s, long past): still too soon (2 × 10 s).
    await h.advance(15_000);
    const [late] = await h.submit({ vcpus: 1, ram: '1GiB' });
    await d.tick();
    expect(d.statusWrites).toBe(1);
    expect(await h.status(late!)).toBeNull();

    // 21 s after it ended: written.
    await h.advance(6_000);
    await d.tick();
    expect(d.statusWrites).toBe(2);
    expect(await h.status(late!)).toMatch(/^queue position 2; /);
    await d.stop();
  });

  it('a failed write is an error event, not a failed pass; the next pass writes again', async () => {
    const { h, gate, d } = await twoWaiting();

    gate.failOnce();
    await d.tick(); // resolves: the pass itself did not fail
    const [b] = d.lastPlan!.statuses.waiting.map((x) => x.id);
    expect(h.events.filter((e) => e.kind === 'error' && e.op === 'statuses')).toMatchObject([
      { message: 'connection lost (injected)' },
    ]);
    expect(await h.status(b!)).toBeNull();

    await h.advance(3_000);
    await d.tick();
    expect(gate.calls).toBe(2);
    expect(await h.status(b!)).toMatch(/^queue position 1; /);
    await d.stop();
  });

  it('stop() releases the lease only once the write in flight ended', async () => {
    const { h, gate, d } = await twoWaiting();

    gate.close();
    await d.tickAhead();
    const [b] = d.lastPlan!.statuses.waiting.map((x) => x.id);
    const stopping = d.stop();
    // A stop that did not wait would have asked for the release within this turn of the event loop.
    await new Promise((r) => setImmediate(r));
    gate.open();
    await stopping;
    expect(gate.releasedWhileHeld).toBe(false);
    expect(await h.status(b!)).toMatch(/^queue position 1; /);
  });
});
