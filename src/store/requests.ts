// Container requests: submit (one or a batch), read, list with filters and cursor pages, cancel,
// change priority. Submitting creates the request and its first container in one transaction.
import { Coalescer, type CoalescerOptions } from '../lib/coalescer.js';
import { firstContainerId, newId } from '../model/ids.js';
import type { RequestSpec } from '../model/request.js';
import type { RequestState } from '../model/types.js';
import type { StoreContext } from './context.js';
import { onCommit, withRetriedTx } from './db.js';
import { ConflictError, NotFoundError } from './errors.js';
import { listPage, type Page } from './pages.js';
import { Where } from './where.js';
import { REQUEST_COLUMNS, serialisedOnce, submittedRecord, type RequestRecord } from './records.js';
import type { Transitions } from './transitions/index.js';
import { DISPATCH_WAKE } from './wake.js';
import { CHANGE_STAMP } from './change-stamp.js';

export interface RequestFilter {
  owner?: string;
  state?: RequestState;
  priorityMin?: number;
  priorityMax?: number;
  /** Substring of the name, case-insensitive. */
  name?: string;
  cursor?: string;
  limit?: number;
}

/** One request to insert and its owner. */
interface Submission {
  owner: string;
  spec: RequestSpec;
}

/**
 * Single submissions per commit and commits in flight: concurrent callers' requests share a statement and
 * its flush to disk (docs/PERFORMANCE.md, "Session 7: single submissions").
 */
export const SUBMISSION_BATCHING: CoalescerOptions = { maxItems: 1000, maxInFlight: 2 };

/** String.prototype.isWellFormed (Node 20; not in the ES2023 lib). */
type WellFormedCheck = string & { isWellFormed(): boolean };
const wf = (s: string | null) => s === null || (s as WellFormedCheck).isWellFormed();
/**
 * Whether a spec's free-text strings hold no lone surrogate (labels, env names and instance types are
 * validated to ASCII). PostgreSQL's jsonb refuses one (a 500 for command, env, secret env), a text column
 * stores it as U+FFFD: such a spec is stored, and answered, with U+FFFD everywhere (wellFormed).
 */
const specWellFormed = (s: RequestSpec) =>
  wf(s.name) &&
  wf(s.image) &&
  wf(s.cwd) &&
  s.command.every(wf) &&
  Object.values(s.env).every(wf) &&
  Object.values(s.secretEnv).every(wf);
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** A copy of v whose strings (values and keys) have each lone surrogate replaced by U+FFFD. */
function wellFormed<T>(v: T): T {
  if (typeof v === 'string') return v.replace(LONE_SURROGATE, '\ufffd') as T;
  if (Array.isArray(v)) return v.map(wellFormed) as T;
  if (v === null || typeof v !== 'object' || v instanceof Date) return v;
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [wellFormed(k), wellFormed(x)])) as T;
}

export class Requests {
  private readonly single: Coalescer<Submission, RequestRecord | Error>;

  constructor(
    private readonly ctx: StoreContext,
    private readonly transitions: Transitions,
    batching: CoalescerOptions = SUBMISSION_BATCHING,
  ) {
    this.single = new Coalescer((items) => this.commitSingles(items), batching);
  }

  /** Group commits of single submissions, their items, and the items waiting (tests and the benchmark). */
  get singleStats(): { calls: number; items: number; pending: number } {
    return { ...this.single.stats, pending: this.single.pending };
  }

  /**
   * Submits requests for `owner`: each gets a Queued container, all of them in one statement (a batch is
   * all or nothing). A single request is group-committed with other callers' (SUBMISSION_BATCHING); one
   * the database refuses fails alone, with its own error.
   */
  async create(owner: string, specs: RequestSpec[]): Promise<RequestRecord[]> {
    if (specs.length === 1) {
      const out = await this.single.submit({ owner, spec: specs[0]! });
      if (out instanceof Error) throw out;
      return [out];
    }
    return this.insert(specs.map((spec) => ({ owner, spec })));
  }

  /** One group of single submissions; when it fails as a whole, each alone (one cannot fail another). */
  private async commitSingles(items: Submission[]): Promise<(RequestRecord | Error)[]> {
    try {
      return await this.insert(items);
    } catch (err) {
      if (items.length === 1) return [err instanceof Error ? err : new Error(String(err))];
      return Promise.all(
        items.map((it) =>
          this.insert([it]).then(
            (r) => r[0]!,
            (e: unknown) => (e instanceof Error ? e : new Error(String(e))),
          ),
        ),
      );
    }
  }

  /** Inserts the requests and their first containers: one statement whatever their number. */
  private async insert(items: Submission[]): Promise<RequestRecord[]> {
    if (items.length === 0) return [];
    const specs = items.map((it) => (specWellFormed(it.spec) ? it.spec : wellFormed(it.spec)));
    const now = this.ctx.clock.now();
    const ms = now.getTime();
    const rids = specs.map(() => newId('r', ms));
    const cids = rids.map(firstContainerId); // no entry in an index by request (migration 191)
    const col = <T>(fn: (s: RequestSpec, i: number) => T) => specs.map(fn);
    // One statement (data-modifying CTEs): atomic without BEGIN/COMMIT round trips, which at a few
    // hundred microseconds each were most of a submission's cost.
    await this.ctx.pool.query({
      // Named: each connection parses and plans it once, not on every submission.
      name: 'berth-create-requests',
      text: `WITH r AS (
         INSERT INTO container_requests (id, owner, name, image, command, env, cwd, vcpus, ram, scratch, gpus,
           preemptible, max_run_time_ms, run_after, instance_types, priority, container_count_max,
           max_temp_retries, retry_on_failure, state, container_id, created_at, updated_at, secret_env, labels,
           opportunistic, ram_retry_factor)
         SELECT u.id, u.owner, u.name, u.image, u.command::jsonb, u.env::jsonb, u.cwd, u.vcpus, u.ram, u.scratch, u.gpus,
           u.preemptible, u.max_run_time_ms, u.run_after, u.instance_types::text[], u.priority, u.ccm, u.mtr, u.rof,
           'Committed', u.cid, $1, $1, u.secret_env::jsonb, u.labels::jsonb, u.opportunistic, u.rrf
         FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::float8[],
           $10::int8[], $11::int8[], $12::int4[], $13::bool[], $14::int8[], $15::timestamptz[], $16::text[],
           $17::int4[], $18::int4[], $19::int4[], $20::bool[], $21::text[], $22::text[], $23::text[], $24::bool[],
           $25::float8[], $2::text[])
           AS u(id, name, image, command, env, cwd, vcpus, ram, scratch, gpus, preemptible, max_run_time_ms,
                run_after, instance_types, priority, ccm, mtr, rof, cid, secret_env, labels, opportunistic, rrf, owner)
         RETURNING id, owner, container_id, priority, vcpus, ram, scratch, gpus, preemptible, instance_types,
           run_after, opportunistic),
       c AS (
         INSERT INTO containers (id, request_id, owner, attempt, state, priority, vcpus, ram, scratch, gpus,
           preemptible, instance_types, queued_at, run_after, created_at, updated_at, opportunistic)
         SELECT container_id, id, owner, 1, 'Queued', priority, vcpus, ram, scratch, gpus, preemptible,
           instance_types, $1, run_after, $1, $1, opportunistic FROM r
         RETURNING id)
       -- no event row: the events read gives the submission's (SUBMITTED_EVENT)
       SELECT count(*) FROM c`,
      values: [
        now,
        items.map((it) => it.owner),
        rids,
        col((s) => s.name),
        col((s) => s.image),
        col((s) => JSON.stringify(s.command)),
        col((s) => JSON.stringify(s.env)),
        col((s) => s.cwd),
        col((s) => s.vcpus),
        col((s) => s.ram),
        col((s) => s.scratch),
        col((s) => s.gpus),
        col((s) => s.preemptible),
        col((s) => s.maxRunTimeMs),
        col((s) => s.runAfter),
        // arrays of arrays must be rectangular in PostgreSQL: pass each list as its text literal
        col((s) => (s.instanceTypes ? `{${s.instanceTypes.join(',')}}` : null)),
        col((s) => s.priority),
        col((s) => s.containerCountMax),
        col((s) => s.maxTempRetries),
        col((s) => s.retryOnFailure),
        cids,
        col((s) => JSON.stringify(s.secretEnv)),
        col((s) => JSON.stringify(s.labels)),
        col((s) => s.opportunistic),
        col((s) => s.ramRetryFactor),
      ],
    });
    this.ctx.wake.send('berth_dispatch', DISPATCH_WAKE.queue);
    // The answer is built from what was inserted, not read back: 1,000 returned rows of 30 columns were a
    // fifth of a batch's server CPU (parsing) and a sub-select per row in PostgreSQL.
    const at = serialisedOnce(now); // every record's created_at and updated_at
    return items.map((it, i) => submittedRecord(it.owner, specs[i]!, rids[i]!, cids[i]!, at));
  }

  /** A request by id; a non-null owner limits it to that owner's requests (others look absent). */
  async get(id: string, owner: string | null = null): Promise<RequestRecord> {
    const r = await this.ctx.pool.query(`SELECT ${REQUEST_COLUMNS} FROM container_requests WHERE id = $1`, [
      id,
    ]);
    const row = r.rows[0] as RequestRecord | undefined;
    if (!row || (owner !== null && row.owner !== owner)) throw new NotFoundError(`request ${id} not found`);
    return row;
  }

  /** A page of requests, newest first. */
  async list(f: RequestFilter): Promise<Page<RequestRecord>> {
    const where = new Where()
      .add('owner = ?', f.owner)
      .add('state = ?', f.state)
      .add('priority >= ?', f.priorityMin)
      .add('priority <= ?', f.priorityMax)
      .add(
        'name ILIKE ?',
        f.name === undefined ? undefined : `%${f.name.replace(/[\\%_]/g, (c) => `\\${c}`)}%`,
      );
    return listPage<RequestRecord>(
      this.ctx.pool,
      'container_requests',
      REQUEST_COLUMNS,
      where,
      f.cursor,
      f.limit,
    );
  }

  /** Cancels a request: its current container is cancelled (class user) and the request becomes Final. */
  async cancel(id: string, owner: string | null, reason = 'cancelled by user'): Promise<RequestRecord> {
    const req = await this.get(id, owner);
    if (req.state === 'Final') return req;
    await withRetriedTx(this.ctx.pool, async (tx) => {
      const now = this.ctx.clock.now();
      // Container first, then request: the same lock order as every other transition.
      const c = await tx.query(`SELECT state FROM containers WHERE id = $1 FOR UPDATE`, [req.container_id]);
      const state = c.rows[0]?.state;
      if (state === 'Queued' || state === 'Locked' || state === 'Running') {
        const end = { state: 'Cancelled' as const, failureClass: 'user' as const, reason };
        await this.transitions.end([{ id: req.container_id!, actor: { kind: 'system' }, end }], tx);
      } else {
        // Between attempts (e.g. the container just ended and no retry is queued): finalise directly.
        await tx.query(
          `UPDATE container_requests SET state = 'Final', outcome = 'cancelled', final_reason = $2, updated_at = $3
           WHERE id = $1 AND state = 'Committed'`,
          [id, reason, now],
        );
      }
    });
    return this.get(id, owner);
  }

  /**
   * Changes a request's priority (and its current container's). 0 withdraws it without cancelling it
   * (DESIGN §3.1, §6.2): a Queued container is not scheduled, a Locked one is unlocked and a Running one
   * killed by the dispatcher (cancelled, class user, which ends the request); a later change back above 0
   * schedules a Queued one again.
   */
  async setPriority(id: string, owner: string | null, priority: number): Promise<RequestRecord> {
    const req = await this.get(id, owner);
    if (req.state === 'Final')
      throw new ConflictError(
        `request ${id} has already finished (${req.outcome}); its priority can no longer change`,
      );
    await withRetriedTx(this.ctx.pool, async (tx) => {
      const now = this.ctx.clock.now();
      // Container first, then request: the same lock order as every other transition.
      await tx.query(`SELECT 1 FROM containers WHERE id = $1 FOR UPDATE`, [req.container_id]);
      const before = await tx.query(`SELECT priority FROM container_requests WHERE id = $1 FOR UPDATE`, [id]);
      await tx.query(`UPDATE container_requests SET priority = $2, updated_at = $3 WHERE id = $1`, [
        id,
        priority,
        now,
      ]);
      await tx.query(
        `UPDATE containers SET priority = $2, updated_at = $3, ${CHANGE_STAMP} WHERE id = $1 AND state IN ('Queued', 'Locked', 'Running')`,
        [req.container_id, priority, now],
      );
      if (req.container_id)
        await tx.query(
          `INSERT INTO container_events (container_id, at, kind, message) VALUES ($1, $2, 'priority', $3)`,
          [
            req.container_id,
            now,
            `priority ${before.rows[0].priority} → ${priority}${priority === 0 ? ' (withdrawn: not scheduled; killed if running)' : ''}`,
          ],
        );
      onCommit(tx, () => this.ctx.wake.send('berth_dispatch', DISPATCH_WAKE.priority));
    });
    return this.get(id, owner);
  }
}
