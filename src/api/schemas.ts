// Request schemas: they validate requests (fastify + ajv) and generate /openapi.json, so the two never
// disagree. Units ("4GiB", "90s") are checked for shape here and parsed with field-named errors by the model.
import { Type, type Static } from '@sinclair/typebox';

const Size = Type.Union([Type.Integer({ minimum: 0 }), Type.String({ maxLength: 64 })], {
  description: 'bytes, or a size such as "4GiB" or "512MiB"',
});
const Duration = Type.Union([Type.Number({ minimum: 0 }), Type.String({ maxLength: 64 })], {
  description: 'seconds, or a duration such as "90s" or "1h30m"',
});
const Nullable = <T extends ReturnType<typeof Type.String>>(t: T) => Type.Union([t, Type.Null()]);

export const RequestInput = Type.Object(
  {
    name: Type.Optional(Type.String({ maxLength: 256 })),
    image: Type.Optional(Type.Union([Type.String({ maxLength: 1024 }), Type.Null()])),
    command: Type.Array(Type.String({ maxLength: 131072 }), { minItems: 1, maxItems: 10000 }),
    env: Type.Optional(Type.Record(Type.String({ maxLength: 256 }), Type.String({ maxLength: 131072 }))),
    cwd: Type.Optional(Nullable(Type.String({ maxLength: 4096 }))),
    vcpus: Type.Optional(Type.Union([Type.Number({ exclusiveMinimum: 0 }), Type.String({ maxLength: 32 })])),
    ram: Type.Optional(Size),
    scratch: Type.Optional(Size),
    gpus: Type.Optional(Type.Integer({ minimum: 0, maximum: 64 })),
    preemptible: Type.Optional(Type.Boolean()),
    max_run_time: Type.Optional(Type.Union([Duration, Type.Null()])),
    run_after: Type.Optional(Nullable(Type.String({ maxLength: 64, description: 'RFC 3339 time' }))),
    instance_types: Type.Optional(
      Type.Union([Type.Array(Type.String({ maxLength: 64 }), { minItems: 1, maxItems: 100 }), Type.Null()]),
    ),
    priority: Type.Optional(Type.Integer({ minimum: 0, maximum: 1000 })),
    container_count_max: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
    max_temp_retries: Type.Optional(Type.Integer({ minimum: 0, maximum: 1000 })),
    retry_on_failure: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false, description: 'A container request' },
);
export type RequestInputT = Static<typeof RequestInput>;

export const BatchInput = Type.Object(
  { requests: Type.Array(RequestInput, { minItems: 1, maxItems: 1000 }) },
  { additionalProperties: false },
);

const Limit = Type.String({ pattern: '^[0-9]{1,4}$', description: 'page size, 1-1000 (default 100)' });
const Priority = Type.String({ pattern: '^[0-9]{1,4}$' });
const Cursor = Type.String({ maxLength: 200 });

export const RequestListQuery = Type.Object(
  {
    state: Type.Optional(Type.Union([Type.Literal('Committed'), Type.Literal('Final')])),
    owner: Type.Optional(Type.String({ maxLength: 256 })),
    priority_min: Type.Optional(Priority),
    priority_max: Type.Optional(Priority),
    name: Type.Optional(Type.String({ maxLength: 256 })),
    cursor: Type.Optional(Cursor),
    limit: Type.Optional(Limit),
  },
  { additionalProperties: false },
);

export const ContainerStateSchema = Type.Union(
  ['Queued', 'Locked', 'Running', 'Complete', 'Cancelled'].map((s) => Type.Literal(s)),
);

export const ContainerListQuery = Type.Object(
  {
    state: Type.Optional(ContainerStateSchema),
    owner: Type.Optional(Type.String({ maxLength: 256 })),
    request_id: Type.Optional(Type.String({ maxLength: 64 })),
    priority_min: Type.Optional(Priority),
    priority_max: Type.Optional(Priority),
    node_id: Type.Optional(Type.String({ maxLength: 64 })),
    cursor: Type.Optional(Cursor),
    limit: Type.Optional(Limit),
  },
  { additionalProperties: false },
);

export const IdParams = Type.Object(
  { id: Type.String({ minLength: 1, maxLength: 64 }) },
  { additionalProperties: false },
);

export const PriorityPatch = Type.Object(
  { priority: Type.Integer({ minimum: 0, maximum: 1000 }) },
  { additionalProperties: false },
);

export const FailureClassSchema = Type.Union([
  Type.Literal('user'),
  Type.Literal('temp'),
  Type.Literal('perm'),
]);

export const CancelBody = Type.Object(
  {
    class: Type.Optional(FailureClassSchema),
    reason: Type.Optional(Type.String({ maxLength: 4096 })),
    dispatcher_id: Type.Optional(Type.String({ maxLength: 64 })),
    lock_token: Type.Optional(Type.String({ maxLength: 256 })),
  },
  { additionalProperties: false },
);

export const CancelRequestBody = Type.Object(
  { reason: Type.Optional(Type.String({ maxLength: 4096 })) },
  { additionalProperties: false },
);

export const LockBody = Type.Object(
  {
    dispatcher_id: Type.String({ minLength: 1, maxLength: 64 }),
    ids: Type.Optional(Type.Array(Type.String({ maxLength: 64 }), { maxItems: 10000 })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 10000 })),
  },
  { additionalProperties: false },
);

export const UnlockBody = Type.Object(
  {
    dispatcher_id: Type.String({ minLength: 1, maxLength: 64 }),
    reason: Type.String({ minLength: 1, maxLength: 4096 }),
  },
  { additionalProperties: false },
);

export const AssignBody = Type.Object(
  {
    dispatcher_id: Type.String({ minLength: 1, maxLength: 64 }),
    instance_id: Type.String({ minLength: 1, maxLength: 128 }),
    node_id: Type.Optional(Type.Union([Type.String({ maxLength: 64 }), Type.Null()])),
  },
  { additionalProperties: false },
);

export const TokenBody = Type.Object(
  { lock_token: Type.String({ minLength: 1, maxLength: 256 }) },
  { additionalProperties: false },
);

export const UsageSchema = Type.Object(
  {
    peak_ram: Type.Integer({ minimum: 0 }),
    cpu_seconds: Type.Number({ minimum: 0 }),
    wall_ms: Type.Integer({ minimum: 0 }),
    scratch_peak: Type.Optional(Type.Integer({ minimum: 0 })),
  },
  { additionalProperties: false },
);

export const CompleteBody = Type.Object(
  {
    lock_token: Type.String({ minLength: 1, maxLength: 256 }),
    exit_code: Type.Integer({ minimum: -1, maximum: 255 }),
    oom_killed: Type.Optional(Type.Boolean()),
    usage: Type.Optional(Type.Union([UsageSchema, Type.Null()])),
    reason: Type.Optional(Type.String({ maxLength: 4096 })),
  },
  { additionalProperties: false },
);

const LockToken = Type.String({ minLength: 1, maxLength: 256 });

const LogChunks = Type.Array(
  Type.Object(
    {
      seq: Type.Integer({ minimum: 0, maximum: 2147483647 }),
      stream: Type.Union([Type.Literal('stdout'), Type.Literal('stderr'), Type.Literal('system')]),
      data: Type.String({ maxLength: 1048576 }),
    },
    { additionalProperties: false },
  ),
  { maxItems: 10000 },
);

export const LogAppendBody = Type.Object(
  {
    lock_token: LockToken,
    chunks: LogChunks,
  },
  { additionalProperties: false },
);

export const LogQuery = Type.Object(
  {
    after: Type.Optional(Type.String({ pattern: '^-?[0-9]{1,10}$' })),
    limit: Type.Optional(Limit),
    follow: Type.Optional(
      Type.Union([Type.Literal('true'), Type.Literal('false'), Type.Literal('1'), Type.Literal('0')]),
    ),
  },
  { additionalProperties: false },
);

export const NodeCreateBody = Type.Object(
  {
    cluster: Type.String({ minLength: 1, maxLength: 64 }),
    dispatcher_tag: Type.String({ minLength: 1, maxLength: 64 }),
    instance_id: Type.String({ minLength: 1, maxLength: 128 }),
    instance_type: Type.String({ minLength: 1, maxLength: 64 }),
  },
  { additionalProperties: false },
);

export const RegisterBody = Type.Object(
  {
    node_id: Type.String({ minLength: 1, maxLength: 64 }),
    secret: Type.String({ minLength: 1, maxLength: 256 }),
    info: Type.Optional(Type.Record(Type.String({ maxLength: 64 }), Type.Unknown())),
  },
  { additionalProperties: false },
);

export const PingBody = Type.Object(
  {
    state: Type.Union([
      Type.Literal('idle'),
      Type.Literal('busy'),
      Type.Literal('draining'),
      Type.Literal('drained'),
    ]),
  },
  { additionalProperties: false },
);

export const TokenCreateBody = Type.Object(
  {
    scope: Type.Union([Type.Literal('admin'), Type.Literal('user'), Type.Literal('dispatcher')]),
    owner: Type.String({ minLength: 1, maxLength: 256, pattern: '^[A-Za-z0-9._@:-]+$' }),
    description: Type.Optional(Type.String({ maxLength: 1024 })),
  },
  { additionalProperties: false },
);

export const TokenIdParams = Type.Object(
  { id: Type.String({ pattern: '^[0-9]{1,15}$' }) },
  { additionalProperties: false },
);

/** Parses a validated numeric query parameter. */
export function intParam(v: string | undefined): number | undefined {
  return v === undefined ? undefined : Number(v);
}

const ContainerId = Type.String({ minLength: 1, maxLength: 64 });

/**
 * An agent's reports about the containers of its node, in one call: starts, log chunks, exits and
 * cancels (each with the container's per-lock token). Answered per report.
 */
export const ReportsBody = Type.Object(
  {
    reports: Type.Array(
      Type.Union([
        Type.Object(
          { kind: Type.Literal('start'), id: ContainerId, lock_token: LockToken },
          { additionalProperties: false },
        ),
        Type.Object(
          { kind: Type.Literal('logs'), id: ContainerId, lock_token: LockToken, chunks: LogChunks },
          { additionalProperties: false },
        ),
        Type.Object(
          {
            kind: Type.Literal('exit'),
            id: ContainerId,
            lock_token: LockToken,
            exit_code: Type.Integer({ minimum: -1, maximum: 255 }),
            oom_killed: Type.Optional(Type.Boolean()),
            usage: Type.Optional(Type.Union([UsageSchema, Type.Null()])),
            reason: Type.Optional(Type.String({ maxLength: 4096 })),
          },
          { additionalProperties: false },
        ),
        Type.Object(
          {
            kind: Type.Literal('cancel'),
            id: ContainerId,
            lock_token: LockToken,
            class: Type.Union([Type.Literal('temp'), Type.Literal('perm')]),
            reason: Type.String({ maxLength: 4096 }),
          },
          { additionalProperties: false },
        ),
      ]),
      { minItems: 1, maxItems: 10000 },
    ),
  },
  { additionalProperties: false },
);
