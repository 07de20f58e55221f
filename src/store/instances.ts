// The instances the dispatchers publish (src/dispatch/pg-mirror.ts), and operator requests on them. Rows of
// gone instances are history (for cost accounting, src/store/cost.ts): listed and requested only while live.
import type { IdleBehavior } from '../model/types.js';
import { ValidationError } from '../model/request.js';
import type { StoreContext } from './context.js';
import type { Pauses } from './pause.js';
import { NotFoundError } from './errors.js';
import { DISPATCH_WAKE } from './wake.js';
import { onCommit, withTx } from './db.js';

export interface InstanceRecord {
  id: string;
  cluster: string;
  dispatcher_tag: string;
  type: string;
  provider_type: string;
  price: number;
  state: string;
  idle_behavior: IdleBehavior;
  node_id: string | null;
  containers: number;
  created_at: Date;
  state_since: Date;
  updated_at: Date;
  last_ping_at: Date | null;
  requested_idle_behavior: IdleBehavior | null;
  kill_requested: boolean;
  preemptible: boolean;
  /** The type's resources when it was created; null for rows older than the history. */
  vcpus: number | null;
  ram: number | null;
  scratch: number | null;
  gpus: number | null;
  /** When its agent first registered. */
  ready_at: Date | null;
  /** When its billing ended (destroy accepted, or found gone). */
  ended_at: Date | null;
  /** When it left the dispatcher's view: set on history rows only. */
  gone_at: Date | null;
}

/** An operator's request's answer: the instance, and the containers it asked to pause and to resume. */
export interface InstanceRequested extends InstanceRecord {
  frozen: string[];
  resumed: string[];
}

export class Instances {
  constructor(
    private readonly ctx: StoreContext,
    private readonly pauses: Pauses,
  ) {}

  async list(): Promise<InstanceRecord[]> {
    const r = await this.ctx.pool.query(
      `SELECT i.*, n.last_ping_at FROM instances i LEFT JOIN nodes n ON n.id = i.node_id WHERE i.gone_at IS NULL
       ORDER BY i.created_at, i.id`,
    );
    return r.rows;
  }

  /** A live instance, or a gone one's record. */
  async get(id: string): Promise<InstanceRecord> {
    const r = await this.ctx.pool.query(
      `SELECT i.*, n.last_ping_at FROM instances i LEFT JOIN nodes n ON n.id = i.node_id WHERE i.id = $1`,
      [id],
    );
    if (!r.rows[0]) throw new NotFoundError(`instance ${id} not found`);
    return r.rows[0];
  }

  /**
   * Records an operator's request (`by`: who asked); the owning dispatcher applies the idle behaviour at its
   * next pass (woken now). A hold with `freeze` freezes the instance's Running containers at once, and a
   * run or drain resumes what a hold froze (Pauses.byHold, the pause flags of berth pause): the answer's
   * `frozen` and `resumed` list the containers this request asked to pause and to resume.
   */
  async request(
    id: string,
    what: { idleBehavior?: IdleBehavior; kill?: boolean; freeze?: boolean },
    by: string,
  ): Promise<InstanceRequested> {
    if (what.freeze && what.idleBehavior !== 'hold')
      throw new ValidationError([{ field: 'freeze', problem: 'only a hold can freeze (hold --freeze)' }]);
    const b = what.idleBehavior;
    // One transaction: the hold and the freezes it asks for (or the run's thaws) land together or not at all.
    const { frozen, resumed } = await withTx(this.ctx.pool, async (tx) => {
      const r = await tx.query(
        `UPDATE instances SET requested_idle_behavior = COALESCE($2, requested_idle_behavior), kill_requested = kill_requested OR $3
         WHERE id = $1 AND gone_at IS NULL RETURNING id`,
        [id, what.idleBehavior ?? null, what.kill ?? false],
      );
      if (r.rowCount === 0) throw new NotFoundError(`instance ${id} not found`);
      onCommit(tx, () => this.ctx.wake.send('berth_dispatch', DISPATCH_WAKE.operator));
      return {
        frozen: what.freeze
          ? await this.pauses.byHold(id, true, by, `instance ${id} held with --freeze`, tx)
          : [],
        resumed:
          b === 'run' || b === 'drain'
            ? await this.pauses.byHold(id, false, by, `instance ${id} set to ${b}`, tx)
            : [],
      };
    });
    return { ...(await this.get(id)), frozen, resumed };
  }
}
