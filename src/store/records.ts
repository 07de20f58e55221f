// The API's view of requests and containers: rows as stored, snake_case, internal columns left out.
import type { Usage } from '../api/schemas.js';
import { queuedText } from '../dispatch/scheduler/statuses.js';
import type { RequestSpec } from '../model/request.js';
import type { ContainerState, FailureClass, RequestState } from '../model/types.js';

export type { Usage };

/** A name in snake_case, as the API spells it: `maxRunTimeMs` → `max_run_time_ms`. */
type SnakeCase<S extends string> = S extends `${infer H}${infer T}`
  ? `${H extends Lowercase<H> ? H : `_${Lowercase<H>}`}${SnakeCase<T>}`
  : S;

/** A request spec's fields in the API's spelling: the one list of fields is RequestSpec's. */
type SpecFields = { [K in keyof RequestSpec as SnakeCase<K & string>]: RequestSpec[K] };

/** A container request as the API returns it: its spec (secrets only by name), state and history. */
export interface RequestRecord extends Omit<SpecFields, 'secret_env'> {
  id: string;
  owner: string;
  /** The names of the secret environment variables; their values are never returned. */
  secret_env_keys: string[];
  state: RequestState;
  container_id: string | null;
  /** The state of the current container (joined in for listings). */
  container_state: ContainerState | null;
  /** Whether the current container is frozen by berth pause (src/store/pause.ts). */
  container_paused: boolean | null;
  attempts: number;
  temp_failures: number;
  outcome: 'success' | 'failed' | 'cancelled' | null;
  final_reason: string | null;
  created_at: Date;
  updated_at: Date;
}

/** A container (one attempt) as the API returns it. */
export interface ContainerRecord {
  id: string;
  request_id: string;
  owner: string;
  attempt: number;
  state: ContainerState;
  priority: number;
  vcpus: number;
  ram: number;
  scratch: number;
  gpus: number;
  preemptible: boolean;
  opportunistic: boolean;
  /** berth pause: what was asked (true: frozen), and whether its agent reported it frozen. */
  pause_wanted: boolean;
  paused: boolean;
  /**
   * The pause was asked by a hold of its instance (`berth instance hold --freeze`), not by a user: the
   * instance's run or drain resumes it (src/store/pause.ts).
   */
  paused_by_hold: boolean;
  instance_types: string[] | null;
  queued_at: Date;
  run_after: Date | null;
  locked_by: string | null;
  lock_count: number;
  instance_id: string | null;
  node_id: string | null;
  started_at: Date | null;
  finished_at: Date | null;
  exit_code: number | null;
  oom_killed: boolean | null;
  failure_class: FailureClass | null;
  runtime_status: string | null;
  usage: Usage | null;
  /** Why it waits, in the dispatcher's words (DESIGN §6.2 rule 7); set while it waits. */
  scheduling_status: string | null;
  created_at: Date;
  updated_at: Date;
}

/** A request row's own columns (RequestRecord but for its container's state). */
export const REQUEST_ROW_COLUMNS = `id, owner, name, image, command, env,
  ARRAY(SELECT k FROM jsonb_object_keys(secret_env) k ORDER BY k COLLATE "C") AS secret_env_keys, cwd, vcpus, ram, scratch, gpus, preemptible,
  opportunistic, ram_retry_factor, max_run_time_ms, run_after, instance_types, priority, container_count_max, max_temp_retries, retry_on_failure,
  labels, state, container_id, attempts, temp_failures, outcome, final_reason, created_at, updated_at`;

/**
 * A copy of `d` whose JSON form is computed once: the records of a batch share one submission time, which
 * JSON.stringify would otherwise turn into a string twice per record (toISOString was ~40 % of serialising a
 * batch's answer). Dates in records are never mutated.
 */
export function serialisedOnce(d: Date): Date {
  const copy = new Date(d.getTime());
  const json = copy.toJSON();
  Object.defineProperty(copy, 'toJSON', { value: () => json });
  return copy;
}

/**
 * The record of a request just submitted, as a read of it returns it (REQUEST_COLUMNS; secret names in
 * code-point order, as "C" sorts them): built from what was inserted, so a batch's answer costs PostgreSQL
 * no RETURNING rows and the server no parsing of them. test/store/submissions.test.ts compares the two.
 */
export function submittedRecord(
  owner: string,
  spec: RequestSpec,
  id: string,
  containerId: string,
  now: Date,
): RequestRecord {
  return {
    id,
    owner,
    name: spec.name,
    image: spec.image,
    command: spec.command,
    env: spec.env,
    secret_env_keys: Object.keys(spec.secretEnv).sort(),
    cwd: spec.cwd,
    vcpus: spec.vcpus,
    ram: spec.ram,
    scratch: spec.scratch,
    gpus: spec.gpus,
    preemptible: spec.preemptible,
    opportunistic: spec.opportunistic,
    ram_retry_factor: spec.ramRetryFactor,
    max_run_time_ms: spec.maxRunTimeMs,
    run_after: spec.runAfter,
    instance_types: spec.instanceTypes,
    priority: spec.priority,
    container_count_max: spec.containerCountMax,
    max_temp_retries: spec.maxTempRetries,
    retry_on_failure: spec.retryOnFailure,
    labels: spec.labels,
    state: 'Committed',
    container_id: containerId,
    attempts: 0,
    temp_failures: 0,
    outcome: null,
    final_reason: null,
    created_at: now,
    updated_at: now,
    container_state: 'Queued',
    container_paused: false,
  };
}

export const REQUEST_COLUMNS = `${REQUEST_ROW_COLUMNS},
  (SELECT c.state FROM containers c WHERE c.id = container_requests.container_id) AS container_state,
  (SELECT c.paused FROM containers c WHERE c.id = container_requests.container_id) AS container_paused`;

/**
 * What a start order (src/store/containers.ts) is read from: `c` a container (or a row with its columns),
 * `r` its request.
 */
export const START_ORDER_COLUMNS = `c.id, c.request_id, c.lock_generation, c.vcpus, c.ram, c.scratch, c.gpus,
  r.image, r.command, r.env, r.secret_env, r.cwd, r.max_run_time_ms, c.opportunistic,
  EXISTS (SELECT 1 FROM checkpoints k WHERE k.request_id = c.request_id) AS has_checkpoint`;

/** A row of START_ORDER_COLUMNS: what an agent needs of the spec to start the container, and its lock. */
export interface StartOrderRow extends Pick<
  SpecFields,
  | 'vcpus'
  | 'ram'
  | 'scratch'
  | 'gpus'
  | 'image'
  | 'command'
  | 'env'
  | 'secret_env'
  | 'cwd'
  | 'max_run_time_ms'
  | 'opportunistic'
> {
  id: string;
  request_id: string;
  lock_generation: number;
  has_checkpoint: boolean;
}

/**
 * SQL: whether container `c` (an alias, or '' for the bare table) belongs to request `request` (an SQL
 * expression: a parameter or a column). Two arms the planner reads as two index scans: the first container by
 * its derived id (firstContainerId, src/model/ids.ts) through the primary key, the others (retries, and first
 * containers older than migration 191) through containers_request_others, whose predicate the second arm
 * repeats word for word. Every read of a request's containers goes through this.
 */
export function ofRequest(c: string, request: string): string {
  const p = c ? `${c}.` : '';
  return `((${p}id = ('c-' || substr(${request}, 3)) AND ${p}request_id = ${request})
    OR (${p}request_id = ${request} AND ${p}id <> ('c-' || substr(${p}request_id, 3))))`;
}

/**
 * SQL: the group-held status of container `c` (a table name or alias; its columns are qualified, since the
 * subquery's own tables have an `id`) as `queued_status`: [queue position, higher-priority ahead, reason]
 * while its status group lists it, else null. Only the one part of the group its id hashes to is read
 * (migration 210), its values plus the group's bases (migration 224), and nothing per row calls a
 * function: the page's plan stays the listing's index scan.
 * The text is made by withStatusText (queuedText's format, its one owner).
 */
export function queuedStatusSql(c: string): string {
  return `(SELECT jsonb_build_array(s.positions[i] + g.position_base, s.higher_ahead[i] + g.higher_ahead_base, g.reason)
     FROM status_groups g
     JOIN status_group_parts s ON s.group_id = g.id AND s.part = (hashtext(${c}.id) & (g.parts - 1))
     CROSS JOIN LATERAL array_position(s.members, ${c}.id) AS i
     WHERE g.id = ${c}.status_group AND i IS NOT NULL) AS queued_status`;
}

/** A row read with queuedStatusSql: its `scheduling_status` is the group's text while the group lists it. */
export function withStatusText<T extends { scheduling_status: string | null }>(
  row: T & { queued_status?: [number, number, string] | null },
): T {
  const { queued_status: q, ...rest } = row;
  return (q ? { ...rest, scheduling_status: queuedText(q[0], q[1], q[2]) } : rest) as T;
}

/** A container's columns, for `SELECT … FROM containers` (unaliased); rows go through withStatusText. */
export const CONTAINER_COLUMNS = `id, request_id, owner, attempt, state, priority, vcpus, ram, scratch, gpus,
  preemptible, opportunistic, pause_wanted, paused, paused_by_hold, instance_types, queued_at, run_after, locked_by, lock_count,
  instance_id, node_id, started_at, finished_at, exit_code, oom_killed, failure_class, runtime_status, usage,
  scheduling_status, ${queuedStatusSql('containers')}, created_at, updated_at`;
