// The change feed's stamp is written by each transition's own update (CHANGE_STAMP, migration 200), not by a
// BEFORE UPDATE trigger whose row lock cost a WAL record per update; an update that forgets it is stamped
// by the AFTER trigger of migration 200.
import { beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/store/db.js';
import type { Store } from '../../src/store/store.js';
import { runContainer, submit, TEST_DISPATCHER, testStore } from '../helpers/store.js';

let store: Store;
let pool: Db;

beforeAll(async () => {
  ({ store } = await testStore());
  pool = store.ctx.pool;
});

/** The container's stamp, and whether it is the transaction id of its last writer (xmin). */
async function stamp(id: string): Promise<{ xid: string; ownWriter: boolean }> {
  const r = await pool.query<{ xid: string; own: boolean }>(
    `SELECT change_xid::text AS xid, change_xid::text::bigint % 4294967296 = xmin::text::bigint AS own
     FROM containers WHERE id = $1`,
    [id],
  );
  return { xid: r.rows[0]!.xid, ownWriter: r.rows[0]!.own };
}

describe('the change stamp', () => {
  it('every transition stamps its own update: the late stamp never runs for them', async () => {
    // The late stamp made to refuse: any transition that forgot CHANGE_STAMP now fails.
    await pool.query(
      `CREATE OR REPLACE FUNCTION berth_container_stamp_late() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN RAISE EXCEPTION 'container % changed without its change stamp', NEW.id; END $$`,
    );
    try {
      const last = new Map<string, string>();
      const changed = async (id: string) => {
        const s = await stamp(id);
        expect(s.ownWriter).toBe(true);
        expect(s.xid).not.toBe(last.get(id));
        last.set(id, s.xid);
      };
      // lock, assign, start, complete (and the retry it queues: an insert, stamped by its default)
      const a = (await submit(store, 'alice', { retry_on_failure: true })).container_id!;
      await changed(a);
      const { nodeId, token } = await runContainer(store, a);
      await changed(a);
      const { retryId } = await store.containers.complete(a, nodeId, token, {
        exitCode: 1,
        oomKilled: false,
        usage: null,
      });
      await changed(a);
      expect(retryId).not.toBeNull();
      // unlock (requeue), priority, lockAssign, a user's cancel
      const b = (await submit(store)).container_id!;
      await store.containers.lock([b], TEST_DISPATCHER);
      await changed(b);
      await store.containers.unlock(b, TEST_DISPATCHER, 'no room');
      await changed(b);
      const req = (await pool.query(`SELECT request_id FROM containers WHERE id = $1`, [b])).rows[0];
      await store.requests.setPriority(req.request_id, null, 7);
      await changed(b);
      const [granted] = await store.transitions.lockAssign(
        [{ id: b, instance: `i-${a}`, node: nodeId }],
        TEST_DISPATCHER,
      );
      expect(granted?.id).toBe(b);
      await changed(b);
      await store.requests.cancel(req.request_id, null);
      await changed(b);
      // a failed node's containers: a placed one is requeued, a running one cancelled (and retried)
      const c = (await submit(store)).container_id!;
      const ran = await runContainer(store, c);
      const d = (await submit(store)).container_id!;
      await store.transitions.lockAssign([{ id: d, instance: `i-${c}`, node: ran.nodeId }], TEST_DISPATCHER);
      await changed(d);
      await store.nodes.fail(ran.nodeId, 'test');
      await changed(c);
      await changed(d);
      const states = await pool.query(`SELECT id, state FROM containers WHERE id IN ($1, $2) ORDER BY id`, [
        c,
        d,
      ]);
      expect(Object.fromEntries(states.rows.map((r) => [r.id, r.state]))).toEqual({
        [c]: 'Cancelled',
        [d]: 'Queued',
      });
    } finally {
      await pool.query(
        `CREATE OR REPLACE FUNCTION berth_container_stamp_late() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN UPDATE containers SET change_xid = pg_current_xact_id() WHERE id = NEW.id; RETURN NULL; END $$`,
      );
    }
  });

  it('an update that does not stamp (ad hoc SQL) is stamped after it, in its transaction', async () => {
    const id = (await submit(store)).container_id!;
    const before = await stamp(id);
    await pool.query(`UPDATE containers SET priority = 9 WHERE id = $1`, [id]);
    const after = await stamp(id);
    expect(after.xid).not.toBe(before.xid);
    expect(after.ownWriter).toBe(true);
    // An update the feed does not watch is not stamped.
    await pool.query(`UPDATE containers SET scheduling_status = 'waits' WHERE id = $1`, [id]);
    expect((await stamp(id)).xid).toBe(after.xid);
  });

  it("a transition's update locks no row before it writes (no Heap/LOCK WAL record)", async () => {
    await pool.query('CREATE EXTENSION IF NOT EXISTS pg_walinspect');
    const id = (await submit(store)).container_id!;
    const { nodeId, token } = await runContainer(store, id);
    // Room on the row's page, so that the update itself (a new version on the same page) writes no lock.
    await pool.query('VACUUM containers');
    const from = (await pool.query(`SELECT pg_current_wal_insert_lsn()::text AS l`)).rows[0].l;
    await store.containers.complete(id, nodeId, token, { exitCode: 0, oomKilled: false, usage: null });
    const to = (await pool.query(`SELECT pg_current_wal_insert_lsn()::text AS l`)).rows[0].l;
    const r = await pool.query(
      `SELECT b.record_type, count(*)::int AS n FROM pg_get_wal_block_info($1::pg_lsn, $2::pg_lsn) b
       WHERE b.relfilenode = pg_relation_filenode('containers') AND b.resource_manager = 'Heap'
       GROUP BY 1 ORDER BY 1`,
      [from, to],
    );
    const byType = Object.fromEntries(r.rows.map((x) => [x.record_type, x.n]));
    expect(byType.UPDATE ?? byType['UPDATE+INIT']).toBeGreaterThan(0);
    expect(byType.LOCK).toBeUndefined();
  });
});
