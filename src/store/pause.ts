// berth pause / berth resume (issue 16 item 4): a user freezes a Running container where it stands and lets
// it run on later. Pausing is a flag on a Running container, not a state: the container state machine
// (DESIGN §3.2, src/model/types.ts) keeps its five states, a paused container still holds its instance and
// its lock, and it ends (completes, is cancelled) exactly as a running one does.
//
// `pause_wanted` is what was asked; `paused` what the agent last reported. The agent learns the difference
// from its ping's answer (pause/resume lists, like the kill list) and freezes or thaws the container with
// its runtime (RunHandle.freeze/thaw); its next ping reports the containers it holds frozen, which sets
// `paused` and writes the event. Every step is idempotent, so a lost answer or a restarted agent converges.
import type { Principal } from './tokens.js';
import type { StoreContext } from './context.js';
import { ConflictError, NotFoundError } from './errors.js';

/** A container of a node's ping, with its pause flags. */
export interface PauseRow {
  id: string;
  state: string;
  pause_wanted: boolean;
  paused: boolean;
}

/**
 * What a node must freeze and thaw: Running containers whose wanted state differs from the frozen state
 * the agent reports (`reported`), or from the stored one when the agent reports none (an older agent).
 */
export function pauseOrders(
  rows: PauseRow[],
  reported: string[] | undefined,
): { pause: string[]; resume: string[] } {
  const frozen = reported ? new Set(reported) : null;
  const pause: string[] = [];
  const resume: string[] = [];
  for (const r of rows) {
    if (r.state !== 'Running') continue;
    const is = frozen ? frozen.has(r.id) : r.paused;
    if (r.pause_wanted && !is) pause.push(r.id);
    else if (!r.pause_wanted && is) resume.push(r.id);
  }
  return { pause, resume };
}

export class Pauses {
  constructor(private readonly ctx: StoreContext) {}

  /**
   * Asks for a Running container to be frozen (`want` true) or to run on (false), for `by` (an admin, or
   * the owner; anyone else sees no such container). Refused with a clear reason when it is not Running.
   * Asking for what is already asked changes nothing. Returns its node, which is woken to act at once.
   */
  async request(id: string, want: boolean, by: Principal): Promise<{ node: string }> {
    const verb = want ? 'pause' : 'resume';
    const now = this.ctx.clock.now();
    const owner = by.scope === 'admin' ? null : by.owner;
    const r = await this.ctx.pool.query<{ node_id: string; changed: boolean; state: string }>(
      `WITH c AS (
         SELECT id, state, node_id, pause_wanted FROM containers
         WHERE id = $1 AND ($3::text IS NULL OR owner = $3) FOR UPDATE),
       u AS (
         UPDATE containers k SET pause_wanted = $2 FROM c
         WHERE k.id = c.id AND c.state = 'Running' AND c.pause_wanted <> $2 RETURNING k.id),
       e AS (
         INSERT INTO container_events (container_id, at, kind, message, data)
         SELECT id, $4, 'pause', $5, jsonb_build_object('pause_wanted', $2) FROM u)
       SELECT c.node_id, c.state, EXISTS (SELECT 1 FROM u) AS changed FROM c`,
      [id, want, owner, now, `${verb} requested by ${by.owner}`],
    );
    const row = r.rows[0];
    if (!row) throw new NotFoundError(`container ${id} not found`);
    if (row.state !== 'Running')
      throw new ConflictError(
        `container ${id} is ${row.state}: only a Running container can be ${want ? 'paused' : 'resumed'}`,
      );
    const node = row.node_id;
    if (row.changed) this.ctx.wake.send('berth_node', node);
    return { node };
  }

  /**
   * Records which of the node's Running containers its agent holds frozen (`paused`, from its ping), and an
   * event for each one that changed. Only a report that reached what was asked counts: a ping the agent sent
   * before its freeze or thaw finished (and abandoned) can reach the server after a newer one, and must not
   * undo it. A report against the wish only earns the order again (pauseOrders), which is idempotent.
   */
  async report(nodeId: string, running: string[], paused: string[]): Promise<void> {
    await this.ctx.pool.query(
      `WITH u AS (
         UPDATE containers SET paused = (id = ANY($3))
         WHERE node_id = $1 AND id = ANY($2) AND state = 'Running' AND paused <> pause_wanted
           AND (id = ANY($3)) = pause_wanted
         RETURNING id, paused)
       INSERT INTO container_events (container_id, at, kind, message, data)
       SELECT id, $4, 'pause', CASE WHEN paused THEN 'paused: frozen by its agent' ELSE 'resumed: running again' END,
         jsonb_build_object('paused', paused)
       FROM u`,
      [nodeId, running, paused, this.ctx.clock.now()],
    );
  }
}
