// The cancel grace (issue 10 item 8): a container cancelled while Running goes on running for the agent's
// kill grace (SIGTERM, then SIGKILL), and what it prints meanwhile and how it ended are worth keeping. The
// per-lock token it ran under stays good, after the cancel revoked it (end.ts moves the generation on by
// one), for exactly two things: appending its logs (logs.ts), and one final report of its exit code and
// usage (end.ts), which closes the grace. Neither changes the container's state (it stays Cancelled: no
// container completes twice), and the grace ends this long after the cancel in any case, so an agent that
// comes back much later is refused as any stale writer is. Not on a node declared failed: its containers
// were cancelled because it was lost, and its agent is exactly the stale writer DESIGN §3.2 refuses.

export const CANCEL_GRACE_MS = 3_600_000;

/**
 * SQL: container `c` is in its cancel grace for an agent holding a token of generation `gen` (an SQL
 * expression) at time `now` (a timestamptz parameter). The caller checks that `c` is on the agent's node.
 */
export function inCancelGrace(c: string, gen: string, now: string): string {
  return `(${c}.state = 'Cancelled' AND ${c}.started_at IS NOT NULL AND ${c}.exit_code IS NULL
    AND ${c}.lock_generation = ${gen} + 1
    AND ${c}.finished_at >= ${now}::timestamptz - make_interval(secs => ${CANCEL_GRACE_MS / 1000})
    AND EXISTS (SELECT 1 FROM nodes gn WHERE gn.id = ${c}.node_id AND gn.state <> 'failed'))`;
}
