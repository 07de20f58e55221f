// The dispatcher reads its containers through changes() (SEAMS §2): a pass in which nothing changed
// reads the containers with one statement, the incremental one, and writes nothing.
import { describe, expect, it } from 'vitest';
import type { DispatchQueue } from '../../src/dispatch/ports.js';
import { harness } from './harness.js';

/** The queue, recording each method called and the SQL statements each one issued. */
function counting(h: Awaited<ReturnType<typeof harness>>) {
  const calls: { method: string; sql: string[] }[] = [];
  const pool = h.store.ctx.pool;
  const query = pool.query.bind(pool) as (...a: unknown[]) => Promise<unknown>;
  let current: { method: string; sql: string[] } | null = null;
  (pool as unknown as { query: (...a: unknown[]) => Promise<unknown> }).query = (...args: unknown[]) => {
    const text = typeof args[0] === 'string' ? args[0] : String((args[0] as { text?: string }).text);
    current?.sql.push(text);
    return query(...args);
  };
  const queue = new Proxy(h.queue, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver) as unknown;
      if (typeof v !== 'function') return v;
      return async (...args: unknown[]) => {
        const call = { method: String(prop), sql: [] as string[] };
        calls.push(call);
        const outer = current;
        current = call;
        try {
          return await (v as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        } finally {
          current = outer;
        }
      };
    },
  }) as DispatchQueue;
  return { queue, calls };
}

describe('the dispatcher on changes()', () => {
  it('a pass in which nothing changed reads the containers with one changes() statement and writes nothing', async () => {
    const h = await harness();
    const { queue, calls } = counting(h);
    const d = h.make({ queue });
    // Work in every state the view holds: one Running, and waiting ones the capped pool cannot place.
    await h.submit(...Array.from({ length: 30 }, () => ({ vcpus: 4, ram: '8GiB' })));
    for (let i = 0; i < 3; i++) {
      await d.tick();
      await h.advance(30_000);
      await h.pingAll();
    }
    await d.tick(); // statuses written, the plan settled
    h.clock.runUntil(h.clock.nowMs() + 1_000);
    await d.tick();
    calls.length = 0;
    const reused = d.plannerStats.reused;
    h.clock.runUntil(h.clock.nowMs() + 1_000);
    await d.tick();

    expect(d.plannerStats.reused).toBe(reused + 1);
    const methods = calls.map((c) => c.method);
    expect(methods).not.toContain('containers');
    expect(methods.filter((m) => m === 'changes')).toEqual(['changes']);
    const read = calls.find((c) => c.method === 'changes')!;
    expect(read.sql).toHaveLength(1);
    // Nothing else but the lease and the node list (and the queue's max_dispatch_attempts).
    expect(new Set(methods)).toEqual(new Set(['heartbeat', 'nodeChanges', 'changes', 'maxDispatchAttempts']));
    const writes = calls
      .filter((c) => c.method !== 'heartbeat')
      .flatMap((c) => c.sql)
      .filter((q) => /^\s*(WITH[\s\S]*)?(INSERT|UPDATE|DELETE)\b/i.test(q));
    expect(writes).toEqual([]);
  });

  it('every full_reload_passes passes the view is read whole (changes() from nothing)', async () => {
    const h = await harness();
    const { queue, calls } = counting(h);
    const d = h.make({ queue, fullReloadPasses: 2 });
    await h.submit({ vcpus: 1, ram: '1GiB' });
    for (let i = 0; i < 6; i++) {
      await d.tick();
      h.clock.runUntil(h.clock.nowMs() + 1_000);
    }
    // The whole reads: the first pass's, then one after every 2 incremental ones.
    expect(calls.filter((c) => c.method === 'changes').map((c) => c.sql[0]!.includes('change_xid'))).toEqual([
      false,
      true,
      true,
      false,
      true,
      true,
    ]);
  });
});
