// The change feed's stamp (migration 020): a statement that changes what the dispatcher's incremental view
// watches (state, priority, locked_by, lock_count, instance_id, run_after) sets it in the same update.
// Migration 200 moved it here from a BEFORE UPDATE trigger, whose row lock cost a WAL record per update;
// an update that does not stamp is stamped again by that migration's AFTER trigger (a second row version).

/** The SET item of the stamp, for an UPDATE of containers. */
export const CHANGE_STAMP = 'change_xid = pg_current_xact_id()';

/** The SET item of the stamp when `condition` (SQL) holds; otherwise the stamp is kept as it is. */
export function changeStampIf(condition: string): string {
  return `change_xid = CASE WHEN ${condition} THEN pg_current_xact_id() ELSE change_xid END`;
}
