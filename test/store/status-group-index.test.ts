// A dropped status group clears its members' pointer (ON DELETE SET NULL) through an index, not a scan
// of every container (migration 141): at a million rows a scan per dropped group took seconds.
import { beforeAll, expect, it } from 'vitest';
import type { Store } from '../../src/store/store.js';
import { submit, testStore } from '../helpers/store.js';

let store: Store;

beforeAll(async () => {
  ({ store } = await testStore());
});

it('dropping a status group finds its members without a sequential scan of containers', async () => {
  const id = (await submit(store)).container_id!;
  const pool = store.ctx.pool;
  const g = await pool.query(
    `INSERT INTO status_groups (dispatcher_id, slot, reason) VALUES ('d-sg', 0, 'waits') RETURNING id`,
  );
  await pool.query(`UPDATE containers SET status_group = $2 WHERE id = $1`, [id, g.rows[0].id]);
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    // With sequential scans priced out, the foreign key's action uses an index when one exists; without
    // one it must still scan, and the transaction's own counters show it.
    await client.query('SET LOCAL enable_seqscan = off');
    await client.query(`DELETE FROM status_groups WHERE id = $1`, [g.rows[0].id]);
    const cleared = await client.query(`SELECT status_group FROM containers WHERE id = $1`, [id]);
    expect(cleared.rows[0].status_group).toBeNull();
    const scans = await client.query(
      `SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relname = 'containers'`,
    );
    expect(Number(scans.rows[0].seq_scan)).toBe(0);
  } finally {
    await client.query('ROLLBACK');
    client.release();
  }
});
