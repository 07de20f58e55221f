// A request's containers (migration 191): the first found by its derived id, the others through the partial
// index containers_request_others; every reader goes through ofRequest (src/store/records.ts).
import { describe, expect, it } from 'vitest';
import { firstContainerId, newId } from '../../src/model/ids.js';
import { ofRequest } from '../../src/store/records.js';
import type { Store } from '../../src/store/store.js';
import { runContainer, submit, testStore } from '../helpers/store.js';

/** Runs a request's current container and ends it with exit 1; returns the retry's id (null when final). */
async function failOnce(store: Store, containerId: string): Promise<string | null> {
  const { nodeId, token } = await runContainer(store, containerId);
  const { retryId } = await store.containers.complete(containerId, nodeId, token, {
    exitCode: 1,
    oomKilled: false,
    usage: null,
  });
  return retryId;
}

/** Every container id of a request through the listing, `limit` a page. */
async function listed(store: Store, requestId: string, limit: number): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await store.containerList.list({ requestId, limit, ...(cursor ? { cursor } : {}) });
    ids.push(...page.items.map((c) => c.id));
    cursor = page.next_cursor ?? undefined;
  } while (cursor);
  return ids;
}

describe("a request's containers", () => {
  it('a request with retries lists all its containers in order (newest first), and no other request’s', async () => {
    const { store, clock } = await testStore();
    const req = await submit(store, 'alice', { container_count_max: 3 });
    const other = await submit(store, 'alice', { container_count_max: 2 });
    expect(req.container_id).toBe(firstContainerId(req.id));
    const attempts = [req.container_id!];
    for (;;) {
      clock.advance(1000); // ids order by time: each attempt a second after the one before
      const next = await failOnce(store, attempts.at(-1)!);
      if (!next) break;
      attempts.push(next);
    }
    expect(attempts).toHaveLength(3);
    await failOnce(store, other.container_id!); // the other request has a retry too
    const newestFirst = [...attempts].reverse();
    expect(await listed(store, req.id, 100)).toEqual(newestFirst);
    expect(await listed(store, req.id, 1)).toEqual(newestFirst); // page by page
    const page = await store.containerList.list({ requestId: req.id, limit: 100 });
    expect(page.items.map((c) => c.attempt)).toEqual([3, 2, 1]);
    expect((await listed(store, other.id, 100)).length).toBe(2);
  });

  it('a first container whose id is not derived (submitted before migration 191) is still listed', async () => {
    const { store, clock } = await testStore();
    const req = await submit(store);
    const old = newId('c', clock.now().getTime());
    // As an older submission left it: the first container's id random, the request pointing at it.
    await store.ctx.pool.query(`UPDATE containers SET id = $2 WHERE id = $1`, [req.container_id, old]);
    await store.ctx.pool.query(`UPDATE container_requests SET container_id = $2 WHERE id = $1`, [
      req.id,
      old,
    ]);
    clock.advance(1000);
    const retry = await failOnce(store, old);
    expect(retry).not.toBeNull();
    expect(await listed(store, req.id, 100)).toEqual([retry, old]);
  });

  it('the read by request is index scans only: the derived id by primary key, the others by the partial index', async () => {
    const { store } = await testStore();
    const req = await submit(store, 'alice', { container_count_max: 2 });
    await failOnce(store, req.container_id!);
    const client = await store.ctx.pool.connect();
    try {
      await client.query('BEGIN');
      // A plan that cannot use the indexes still scans the table, only at a prohibitive cost.
      await client.query('SET LOCAL enable_seqscan = off');
      const plan = await client.query(
        `EXPLAIN (FORMAT JSON) SELECT id FROM containers WHERE ${ofRequest('', '$1::text')}`,
        [req.id],
      );
      const text = JSON.stringify(plan.rows[0]);
      expect(text).not.toContain('Seq Scan');
      expect(text).toContain('"Index Name":"containers_pkey"');
      expect(text).toContain('"Index Name":"containers_request_others"');
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
  });
});
