// berth pause / berth resume (issue 16 item 4): a user freezes a Running container where it stands and lets
// it run on later. Pausing is a flag on a Running container, not a state: the container state machine
// (DESIGN §3.2, src/model/types.ts) keeps its five states, a paused container still holds its instance and
// its lock, and it ends (completes, is cancelled) exactly as a running one does.
//
// `pause_wanted` is what was asked; `paused` what the agent last reported. The agent learns the difference
// from its ping's answer (pause/resume lists, like the kill list) and freezes or thaws the container with
// its runtime (RunHandle.freeze/thaw); its next ping reports the containers it holds frozen, which sets
// `paused` and writes the event. Every step is idempotent, so a lost answer or a restarted agent converges.
//
// Holding an instance can freeze what runs on it (`berth instance hold ID --freeze`): the hold sets the
// same `pause_wanted` on each of the instance's Running containers (the one way a container is paused)
// and marks the ones it asked for `paused_by_hold`. The instance's run or drain resumes only those: a
// container its user paused stays paused. A user's own pause or resume of a container the hold froze
// takes it over (the mark is cleared), so the instance's run leaves it as the user last said.
import type { Principal } from './tokens.js';
import type { StoreContext } from './context.js';
import { ConflictError, NotFoundError } from './errors.js';
import { onCommit, type Queryable, type Tx } from './db.js';

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
         SELECT id, state, node_id, pause_wanted, paused_by_hold FROM containers
         WHERE id = $1 AND ($3::text IS NULL OR owner = $3) FOR UPDATE),
       u AS (
         UPDATE containers k SET pause_wanted = $2, paused_by_hold = false FROM c
         WHERE k.id = c.id AND c.state = 'Running' AND (c.pause_wanted <> $2 OR c.paused_by_hold)
         RETURNING k.id),
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
   * A hold of `instance` freezes what runs on it (`freeze` true: each Running container not already asked to
   * pause is asked, and marked paused_by_hold), or its run or drain resumes what a hold froze (false: the
   * marked ones, and only those). One `pause` event per container, saying who and why (`why`: "instance i-1
   * held with --freeze"); their nodes are woken to act at once. Returns the ids asked, in id order. Asking
   * again changes nothing; a container that starts on a held instance later is not frozen by it.
   */
  async byHold(
    instance: string,
    freeze: boolean,
    by: string,
    why: string,
    tx: Queryable = this.ctx.pool,
  ): Promise<string[]> {
    const verb = freeze ? 'pause' : 'resume';
    const r = await tx.query<{ id: string; node_id: string }>(
      `WITH u AS (
         UPDATE containers SET pause_wanted = $2, paused_by_hold = $2
         WHERE instance_id = $1 AND state = 'Running'
           AND (CASE WHEN $2 THEN NOT pause_wanted ELSE paused_by_hold END)
         RETURNING id, node_id),
       e AS (
         INSERT INTO container_events (container_id, at, kind, message, data)
         SELECT id, $3, 'pause', $4, jsonb_build_object('pause_wanted', $2, 'hold', $5::text) FROM u)
       SELECT id, node_id FROM u ORDER BY id`,
      [instance, freeze, this.ctx.clock.now(), `${verb} requested by ${by}: ${why}`, instance],
    );
    const nodes = new Set(r.rows.map((x) => x.node_id));
    const wake = () => {
      for (const node of nodes) this.ctx.wake.send('berth_node', node);
    };
    if (tx === this.ctx.pool) wake();
    else onCommit(tx as Tx, wake);
    return r.rows.map((x) => x.id);
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
