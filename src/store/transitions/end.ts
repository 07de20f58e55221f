// Running → Complete and → Cancelled for a batch of containers, and what each one's request does next
// (DESIGN §3.3): two statements in one transaction, whatever the batch size.
//  1. end the containers whose guard holds (state from the transition table, and who asks) and row-lock
//     their requests (lock order everywhere: container rows, then request rows);
//  2. after decideRetry (src/model/retry.ts, the one owner of retry rules, shared with the simulator)
//     has decided each request: finalise some, queue the retries of the others, write every event.
// One statement when no request needs reading (decideAlone: every item a success or a user's cancel, the
// common batch): end, finalise the current attempts' requests and write the events together.
import { describeExit, oomWarning } from '../../model/exit.js';
import { newId } from '../../model/ids.js';
import {
  decideAlone,
  decideRetry,
  grownRam,
  retryRunAfter,
  type ContainerEnd,
  type FinalAlone,
  type RetryDecision,
} from '../../model/retry.js';
import { formatSize } from '../../model/units.js';
import { statesFrom, type Actor } from '../../model/transitions.js';
import type { FailureClass } from '../../model/types.js';
import type { StoreContext } from '../context.js';
import { onCommit, type Tx } from '../db.js';
import type { Usage } from '../records.js';
import { EventRows } from './events.js';
import { inCancelGrace } from './grace.js';
import { firstOfEach, outcomes, type Outcome } from './outcome.js';
import { DISPATCH_WAKE } from '../wake.js';
import { CHANGE_STAMP } from '../change-stamp.js';

/** How a container ends, as the store records it. */
export type Ending =
  | { state: 'Complete'; exitCode: number; oomKilled: boolean; usage: Usage | null; reason?: string | null }
  | {
      state: 'Cancelled';
      failureClass: FailureClass;
      reason: string;
      /** false: no retry can succeed, so the request ends now (decideRetry). Default true. */
      retryable?: boolean;
      /** The cloud reclaimed its instance (a spot interruption): its retry counts one more. */
      interrupted?: boolean;
      /** The agent reclaimed an opportunistic container: retried at once, counting no failure (retry.ts). */
      reclaimed?: boolean;
    };

/** One container to end: who asks (their guard) and how it ends. */
export interface EndItem {
  id: string;
  actor: Actor;
  end: Ending;
}

/**
 * An ended item's outcome carries the retry queued for its request, if one was; `afterCancel`: the
 * agent's exit report of a container in its cancel grace (grace.ts), recorded on the Cancelled container.
 */
export type EndOutcome = Outcome & { retryId?: string | null; afterCancel?: true };

interface EndedRow {
  id: string;
  request_id: string;
  attempt: number;
  queued_at: Date;
  spot_interruptions: number;
  node_id: string | null;
  state: 'Complete' | 'Cancelled';
  request_state: 'Committed' | 'Final';
  container_id: string | null;
  priority: number;
  attempts: number;
  temp_failures: number;
  container_count_max: number;
  max_temp_retries: number;
  retry_on_failure: boolean;
  run_after: Date | null;
  ram: number;
  ram_retry_factor: number | null;
}

/** The guard columns of an actor: null means "not checked" (see the WHERE clause below). */
function guard(
  a: Actor,
): [node: string | null, gen: number | null, holder: string | null, owner: string | null] {
  switch (a.kind) {
    case 'agent':
      // A token that is not genuine matches no generation: refused, and explained as stale.
      return [a.node, a.generation ?? -1, null, null];
    case 'dispatcher':
      return [null, null, a.id, null];
    case 'user':
      return [null, null, null, a.owner];
    case 'node':
      return [a.node, null, null, null];
    case 'system':
      return [null, null, null, null];
  }
}

// $1 now, the items from $2 on (the guard's columns as guard() gives them), the states $13 and $14.
const ENDED = `
  i AS (
    SELECT * FROM unnest($2::text[], $3::text[], $4::int4[], $5::bool[], $6::jsonb[], $7::text[], $8::text[],
      $9::text[], $10::int4[], $11::text[], $12::text[])
      AS i(id, state, exit_code, oom, usage, failure_class, reason, g_node, g_gen, g_holder, g_owner)),
  ended AS (
    UPDATE containers c SET state = i.state, finished_at = $1, updated_at = $1, exit_code = i.exit_code,
      oom_killed = i.oom, usage = COALESCE(i.usage, c.usage), failure_class = i.failure_class,
      runtime_status = i.reason, ${CHANGE_STAMP},
      -- a cancel revokes the per-lock token; after a completion the agent may still ship its last logs
      lock_generation = c.lock_generation + (i.state = 'Cancelled')::int
    FROM i
    WHERE c.id = i.id AND c.state = ANY(CASE i.state WHEN 'Complete' THEN $13::text[] ELSE $14::text[] END)
      AND (i.g_node IS NULL OR c.node_id = i.g_node)
      AND (i.g_gen IS NULL OR c.lock_generation = i.g_gen)
      AND (i.g_holder IS NULL OR c.locked_by IS NULL OR c.locked_by = i.g_holder)
      AND (i.g_owner IS NULL OR c.owner = i.g_owner)
    RETURNING c.id, c.request_id, c.attempt, c.queued_at, c.node_id, c.state, c.spot_interruptions, c.ram)`;

export const END_SQL = `
  WITH ${ENDED}
  SELECT e.*, r.state AS request_state, r.container_id, r.priority, r.attempts, r.temp_failures,
    r.container_count_max, r.max_temp_retries, r.retry_on_failure, r.run_after, r.ram_retry_factor
  FROM ended e JOIN container_requests r ON r.id = e.request_id
  FOR UPDATE OF r`;

// A batch whose every request's course is decided without reading the request (decideAlone: a success, a
// user's cancel): the containers, their requests (the current attempt's, not yet Final) and the events of
// the ended ones in one statement, the request rows locked by their update (containers first, as above).
// $15–$17 the decisions by item, the events from $18 on.
export const END_ALONE_SQL = `
  WITH ${ENDED},
  f AS (
    UPDATE container_requests r SET state = 'Final', outcome = d.outcome, final_reason = d.reason,
      attempts = r.attempts + d.added, updated_at = $1
    FROM ended e JOIN unnest($2::text[], $15::text[], $16::text[], $17::int4[]) AS d(id, outcome, reason, added)
      ON d.id = e.id
    WHERE r.id = e.request_id AND r.state <> 'Final' AND r.container_id = e.id),
  ev AS (${EventRows.INSERT_SQL(18, 'ended')})
  SELECT id, state, node_id FROM ended`;

const NEXT_SQL = `
  WITH f AS (
    UPDATE container_requests r SET state = 'Final', outcome = f.outcome, final_reason = f.reason,
      attempts = f.attempts, temp_failures = f.temp, updated_at = $1
    FROM unnest($2::text[], $3::text[], $4::text[], $5::int4[], $6::int4[]) AS f(id, outcome, reason, attempts, temp)
    WHERE r.id = f.id),
  t AS (
    UPDATE container_requests r SET container_id = t.cid, attempts = t.attempts, temp_failures = t.temp,
      updated_at = $1
    FROM unnest($7::text[], $8::text[], $9::int4[], $10::int4[], $11::int4[], $12::timestamptz[],
      $13::timestamptz[], $14::int4[], $15::int8[]) AS t(id, cid, attempts, temp, attempt, queued_at, run_after, spot, ram)
    WHERE r.id = t.id
    RETURNING r.id, r.owner, r.priority, r.vcpus, t.ram, r.scratch, r.gpus, r.preemptible, r.instance_types,
      r.opportunistic, t.cid, t.attempt, t.queued_at, t.run_after, t.spot),
  n AS (
    INSERT INTO containers (id, request_id, owner, attempt, state, priority, vcpus, ram, scratch, gpus,
      preemptible, instance_types, queued_at, run_after, created_at, updated_at, spot_interruptions, opportunistic)
    SELECT cid, id, owner, attempt, 'Queued', priority, vcpus, ram, scratch, gpus, preemptible, instance_types,
      queued_at, run_after, $1, $1, spot, opportunistic FROM t)
  ${EventRows.INSERT_SQL(16)}`;

// The most memory a container can be given: the largest instance type a live dispatcher offers, less its
// ram_overhead (their published views, src/dispatch/pg-mirror.ts). NULL when none has published one.
const LARGEST_RAM_SQL = `
  SELECT max((t->>'ram')::float8 - COALESCE((d.view->'limits'->>'ram_overhead')::float8, 0)) AS ram
  FROM dispatchers d CROSS JOIN LATERAL jsonb_array_elements(d.view->'instance_types') t
  WHERE d.stopped_at IS NULL AND jsonb_typeof(d.view->'instance_types') = 'array'`;

// The exit an agent reports for a container in its cancel grace (grace.ts): recorded on the Cancelled
// container (which closes the grace: exit_code is set), its state and its request's course unchanged.
const AFTER_CANCEL_SQL = `
  WITH r AS (
    UPDATE containers c SET exit_code = i.exit_code, oom_killed = i.oom, usage = COALESCE(i.usage, c.usage),
      updated_at = $1
    FROM unnest($2::text[], $3::text[], $4::int4[], $5::int4[], $6::bool[], $7::jsonb[], $8::text[])
      AS i(id, node, gen, exit_code, oom, usage, message)
    WHERE c.id = i.id AND c.node_id = i.node AND ${inCancelGrace('c', 'i.gen', '$1')}
    RETURNING c.id, i.exit_code, i.oom, i.message)
  INSERT INTO container_events (container_id, at, kind, message, data)
  SELECT id, $1, 'exit', message, jsonb_build_object('exit_code', exit_code, 'oom_killed', oom) FROM r
  RETURNING container_id AS id`;

/** Records the exits of the agents' Complete items that are in their cancel grace; their ids. */
async function exitsAfterCancel(
  ctx: StoreContext,
  tx: Tx,
  now: Date,
  items: EndItem[],
): Promise<Set<string>> {
  const late = items.flatMap((it) =>
    it.end.state === 'Complete' && it.actor.kind === 'agent' && it.actor.generation !== null
      ? [{ it, end: it.end, actor: it.actor, gen: it.actor.generation }]
      : [],
  );
  if (late.length === 0) return new Set();
  const r = await tx.query<{ id: string }>(AFTER_CANCEL_SQL, [
    now,
    late.map((x) => x.it.id),
    late.map((x) => x.actor.node),
    late.map((x) => x.gen),
    late.map((x) => x.end.exitCode),
    late.map((x) => x.end.oomKilled),
    late.map((x) => (x.end.usage ? JSON.stringify(x.end.usage) : null)),
    late.map(
      (x) =>
        `after the cancel: ${describeExit(x.end.exitCode, x.end.oomKilled)}${x.end.reason ? ` (${x.end.reason})` : ''}`,
    ),
  ]);
  return new Set(r.rows.map((row) => row.id));
}

/** How an ending reads to the retry rules (src/model/retry.ts). */
function containerEnd(end: Ending): ContainerEnd {
  return {
    state: end.state,
    exitCode: end.state === 'Complete' ? end.exitCode : null,
    failureClass: end.state === 'Cancelled' ? end.failureClass : null,
    reason: end.reason ?? null,
    oomKilled: end.state === 'Complete' && end.oomKilled,
    retryable: end.state === 'Complete' || end.retryable !== false,
    reclaimed: end.state === 'Cancelled' && end.reclaimed === true,
  };
}

/** The events of a container's end: its state, and a reclaim or an OOM warning when there is one. */
function addEndEvents(events: EventRows, id: string, end: Ending): void {
  const retryable = end.state === 'Complete' || end.retryable !== false;
  const what =
    end.state === 'Complete'
      ? `completed with ${describeExit(end.exitCode, end.oomKilled)}`
      : `cancelled (${end.failureClass}${retryable ? '' : ', not retryable'}): ${end.reason}`;
  events.add(id, 'state', `${end.state}: ${what}`, {
    state: end.state,
    ...(retryable ? {} : { retryable: false }),
  });
  if (end.state === 'Cancelled' && end.reclaimed) events.add(id, 'reclaim', end.reason, { reclaimed: true });
  const warning = end.state === 'Complete' ? oomWarning(end.exitCode, end.oomKilled) : null;
  if (warning) events.add(id, 'warning', warning, { oom_killed: true });
}

/** Ends the containers of `items` inside `tx`; see the file comment. */
export async function endContainers(ctx: StoreContext, tx: Tx, items: EndItem[]): Promise<EndOutcome[]> {
  if (items.length === 0) return [];
  const now = ctx.clock.now();
  const batch = firstOfEach(items);
  const col = <T>(f: (it: EndItem) => T) => batch.map(f);
  const guards = batch.map((it) => guard(it.actor));
  const params = [
    now,
    col((it) => it.id),
    col((it) => it.end.state),
    col((it) => (it.end.state === 'Complete' ? it.end.exitCode : null)),
    col((it) => (it.end.state === 'Complete' ? it.end.oomKilled : null)),
    col((it) => (it.end.state === 'Complete' && it.end.usage ? JSON.stringify(it.end.usage) : null)),
    col((it) => (it.end.state === 'Cancelled' ? it.end.failureClass : null)),
    col((it) => it.end.reason ?? null),
    guards.map((g) => g[0]),
    guards.map((g) => g[1]),
    guards.map((g) => g[2]),
    guards.map((g) => g[3]),
    statesFrom('complete'),
    statesFrom('cancel'),
  ];
  const alone = batch.map((it) => decideAlone(containerEnd(it.end)));
  let ended: Pick<EndedRow, 'id' | 'state' | 'node_id'>[];
  let retries = new Map<string, string>();
  if (alone.every((d) => d !== null)) {
    // One statement: no request needs reading to decide its course.
    const events = new EventRows();
    for (const it of batch) addEndEvents(events, it.id, it.end);
    const decided = alone as FinalAlone[];
    const r = await tx.query<Pick<EndedRow, 'id' | 'state' | 'node_id'>>({
      name: 'berth-end-alone',
      text: END_ALONE_SQL,
      values: [
        ...params,
        decided.map((d) => d.outcome),
        decided.map((d) => d.reason),
        decided.map((d) => d.attemptsAdded),
        ...events.params(),
      ],
    });
    ended = r.rows;
  } else {
    const r = await tx.query<EndedRow>({ name: 'berth-end', text: END_SQL, values: params });
    ended = r.rows;
    retries = await next(ctx, tx, now, r.rows, new Map(batch.map((it) => [it.id, it])));
  }

  if (ended.length > 0) onCommit(tx, () => ctx.wake.send('berth_dispatch', DISPATCH_WAKE.finish));
  for (const row of ended)
    if (row.state === 'Cancelled' && row.node_id) {
      const node = row.node_id;
      onCommit(tx, () => ctx.wake.send('berth_node', node));
    }
  const done = new Map(ended.map((r) => [r.id, r.state]));
  const late = await exitsAfterCancel(
    ctx,
    tx,
    now,
    batch.filter((it) => !done.has(it.id)),
  );
  for (const id of late) done.set(id, 'Cancelled');
  const kind = (it: EndItem) => (it.end.state === 'Complete' ? 'complete' : 'cancel');
  const out = await outcomes(tx, kind, items, done, now.getTime());
  return out.map((o) => {
    if (!o.ok) return o;
    if (late.has(o.id)) return { ...o, retryId: null, afterCancel: true as const };
    return { ...o, retryId: retries.get(o.id) ?? null };
  });
}

/** Statement 2: each ended container's request is finalised or retried; every event is written. */
async function next(
  ctx: StoreContext,
  tx: Tx,
  now: Date,
  rows: EndedRow[],
  items: Map<string, EndItem>,
): Promise<Map<string, string>> {
  const events = new EventRows();
  const final: { id: string; d: Extract<RetryDecision, { kind: 'final' }> }[] = [];
  const retry: {
    row: EndedRow;
    cid: string;
    d: Extract<RetryDecision, { kind: 'retry' }>;
    /** The retry's ram when it grows after an OOM kill (grownRam). */
    ram: number | null;
  }[] = [];
  let largest: Promise<number | null> | null = null;
  const largestRam = () => (largest ??= largestOffered(tx));
  for (const row of rows) {
    const end = items.get(row.id)!.end;
    addEndEvents(events, row.id, end);
    // An old attempt, or a request already final (cancelled between attempts): nothing more to decide.
    if (row.request_state === 'Final' || row.container_id !== row.id) continue;
    const facts = containerEnd(end);
    const d = decideRetry(
      facts,
      {
        priority: row.priority,
        attempts: row.attempts,
        tempFailures: row.temp_failures,
        containerCountMax: row.container_count_max,
        maxTempRetries: row.max_temp_retries,
        retryOnFailure: row.retry_on_failure,
      },
      ctx.rng,
    );
    if (d.kind === 'final') final.push({ id: row.request_id, d });
    else {
      // grownRam owns the rule; the largest offered type is read only when the request would grow.
      const factor = row.ram_retry_factor;
      const ram =
        grownRam(facts, Number(row.ram), factor, null) === null
          ? null
          : grownRam(facts, Number(row.ram), factor, await largestRam());
      retry.push({ row, cid: newId('c', now.getTime()), d, ram });
    }
  }
  const runAfter = retry.map(({ row, d }) => {
    const t = retryRunAfter(now.getTime(), d.delayMs, row.run_after?.getTime() ?? null);
    return t === null ? null : new Date(t);
  });
  retry.forEach(({ row, cid, d, ram }) => {
    const delay =
      d.delayMs > 0 ? ` after a backoff until ${new Date(now.getTime() + d.delayMs).toISOString()}` : '';
    events.add(row.id, 'retry', `retried as ${cid}${delay}: ${d.reason}`, { retry: cid });
    if (ram !== null)
      events.add(
        row.id,
        'grow',
        `retried with ${formatSize(ram)} ram instead of ${formatSize(Number(row.ram))} (ram_retry_factor ${row.ram_retry_factor}, after an OOM kill)`,
        { retry: cid, ram, from: Number(row.ram) },
      );
    events.add(cid, 'state', `Queued: attempt ${row.attempt + 1}, retrying ${row.id} (${d.reason})`, {
      state: 'Queued',
    });
  });
  if (events.size === 0) return new Map();
  await tx.query({
    name: 'berth-end-next',
    text: NEXT_SQL,
    values: [
      now,
      final.map((f) => f.id),
      final.map((f) => f.d.outcome),
      final.map((f) => f.d.reason),
      final.map((f) => f.d.attempts),
      final.map((f) => f.d.tempFailures),
      retry.map((r) => r.row.request_id),
      retry.map((r) => r.cid),
      retry.map((r) => r.d.attempts),
      retry.map((r) => r.d.tempFailures),
      retry.map((r) => r.row.attempt + 1),
      retry.map((r) => r.row.queued_at),
      runAfter,
      // A retry carries its predecessor's spot interruptions, plus one when that one was interrupted.
      retry.map(({ row }) => {
        const end = items.get(row.id)!.end;
        return row.spot_interruptions + (end.state === 'Cancelled' && end.interrupted ? 1 : 0);
      }),
      retry.map((r) => r.ram ?? r.row.ram),
      ...events.params(),
    ],
  });
  return new Map(retry.map((r) => [r.row.id, r.cid]));
}

/** The largest ram any live dispatcher's instance types offer (LARGEST_RAM_SQL), or null. */
async function largestOffered(tx: Tx): Promise<number | null> {
  const r = await tx.query<{ ram: number | null }>(LARGEST_RAM_SQL);
  const ram = r.rows[0]?.ram ?? null;
  return ram === null ? null : Math.floor(ram);
}
