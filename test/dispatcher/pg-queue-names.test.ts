// The snapshot's request names (PgQueue's `names`): read only when the run-time estimates need them
// (run-history.ts); without them, every other field of the snapshot is the same. Likewise the request's
// max_run_time as the container's expected run time (`runLimits`), which end-aligned placement reads.
import { describe, expect, it } from 'vitest';
import { parseDispatchConfig } from '../../src/dispatch/config.js';
import { PgQueue } from '../../src/dispatch/pg-queue.js';
import { learnsRunTimes, readsExpectedRuns } from '../../src/dispatch/scheduler/durations.js';
import { submit, testStore } from '../helpers/store.js';

describe('PgQueue names', () => {
  it('carries each container’s request name only when asked, in containers() and changes()', async () => {
    const { store, db, clock } = await testStore();
    const r = await submit(store, 'alice', { name: 'align (7)' });
    const named = new PgQueue(store, db.url, { names: true });
    const plain = new PgQueue(store, db.url);
    const now = clock.now();

    const [withName] = await named.containers('c/t', now);
    const [without] = await plain.containers('c/t', now);
    expect(withName).toMatchObject({ id: r.container_id, name: 'align (7)' });
    expect(without).not.toHaveProperty('name');
    const { name: _, ...rest } = withName!;
    expect(without).toEqual(rest);

    const first = await named.changes('c/t', now, null);
    expect(first.upserts.map((c) => c.name)).toEqual(['align (7)']);
    expect((await plain.changes('c/t', now, null)).upserts).toEqual([without]);
    // A changed row read incrementally: the same columns.
    await store.containers.lock([r.container_id!], 'c/t');
    const next = await named.changes('c/t', now, first.cursor);
    expect(next.upserts.map((c) => [c.state, c.name])).toEqual([['Locked', 'align (7)']]);
    const plainNext = await plain.changes('c/t', now, first.cursor);
    expect(plainNext.upserts.map((c) => [c.state, c.name])).toEqual([['Locked', undefined]]);
  });

  it('carries the request’s max_run_time as the expected run time only when asked', async () => {
    const { store, db, clock } = await testStore();
    const limited = await submit(store, 'alice', { max_run_time: '90m' });
    const unlimited = await submit(store, 'alice', {});
    const withLimits = new PgQueue(store, db.url, { runLimits: true });
    const plain = new PgQueue(store, db.url);
    const now = clock.now();
    const byId = (list: { id: string; expectedRunMs?: number }[]) =>
      Object.fromEntries(list.map((c) => [c.id, c.expectedRunMs]));

    expect(byId(await withLimits.containers('c/t', now))).toEqual({
      [limited.container_id!]: 90 * 60_000,
      [unlimited.container_id!]: undefined,
    });
    expect((await plain.containers('c/t', now)).map((c) => c.expectedRunMs)).toEqual([undefined, undefined]);
    const first = await withLimits.changes('c/t', now, null);
    expect(byId(first.upserts)[limited.container_id!]).toBe(90 * 60_000);
    await store.containers.lock([limited.container_id!], 'c/t');
    const next = await withLimits.changes('c/t', now, first.cursor);
    // The feed may hand the other row over again while a transaction anywhere on the server (another test
    // file's) is older than its stamp: only the locked one is asked about.
    const locked = next.upserts.filter((c) => c.id === limited.container_id);
    expect(locked.map((c) => [c.state, c.expectedRunMs])).toEqual([['Locked', 90 * 60_000]]);
  });

  it('the production dispatcher reads what its scheduler options use', () => {
    const config = (scheduler: Record<string, unknown>) => parseDispatchConfig({ scheduler }).scheduler;
    // Defaults: wait_for_running reads names; end_aligned `expected` reads run limits.
    expect([learnsRunTimes(config({})), readsExpectedRuns(config({}))]).toEqual([true, true]);
    // boot_budget (default 4) reads names too.
    expect(learnsRunTimes(config({ wait_for_running: false, end_aligned: 'off' }))).toBe(true);
    const off = { wait_for_running: false, end_aligned: 'off', boot_budget: 0 };
    expect([learnsRunTimes(config(off)), readsExpectedRuns(config(off))]).toEqual([false, false]);
    expect(learnsRunTimes(config({ ...off, boot_ahead: 8 }))).toBe(true);
    expect(learnsRunTimes(config({ ...off, end_aligned: 'history' }))).toBe(true);
  });
});
