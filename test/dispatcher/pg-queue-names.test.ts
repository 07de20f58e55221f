// The snapshot's request names (PgQueue's `names`): read only when wait_for_running's run-time estimates
// need them (run-history.ts); without them, every other field of the snapshot is the same.
import { describe, expect, it } from 'vitest';
import { PgQueue } from '../../src/dispatch/pg-queue.js';
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
});
