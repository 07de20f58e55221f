// The API's wire format, declared once: these schemas validate requests (fastify + ajv), type the
// handlers (the TypeBox type provider derives req.body/params/query from them), generate /openapi.json,
// and their Static types are what the agent sends. Units ("4GiB", "90s") are checked for shape here and
// parsed with field-named errors by the model (src/model/request.ts).
//
// Every string is one PostgreSQL can store (no NUL: text and jsonb cannot hold \u0000), and every number
// has a range its column can hold, so no input reaches the database that it would refuse with a 500.
import { Type, type Static, type StringOptions, type TSchema, type TString } from '@sinclair/typebox';
import { REQUEST_LIMITS } from '../model/request.js';
import { CONTAINER_STATES } from '../model/types.js';

/** The pattern of a string without NUL; errors.ts words its failure as "must not contain a NUL character". */
export const NO_NUL = '^[^\\u0000]*$';

/** A string a PostgreSQL text column can hold. */
export const Text = (o: StringOptions = {}) => Type.String({ pattern: NO_NUL, ...o });

const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);
/** An object of KEY: value whose every key matches the key schema (TypeBox's Record admits any other key). */
const Dict = <K extends TString, V extends TSchema>(key: K, value: V, maxProperties: number) =>
  Type.Record(key, value, { maxProperties, additionalProperties: false });
const idOf = (kind: string, what: string) =>
  Type.String({
    pattern: `^${kind}-[0-9a-z]{16}$`,
    description: `a ${what} id (${kind}- and 16 letters or digits)`,
  });

export const RequestId = idOf('r', 'request');
export const ContainerId = idOf('c', 'container');
export const NodeId = idOf('n', 'node');
/** A cloud's instance id ("i-0abc…", "local-…"). */
export const InstanceId = Type.String({
  pattern: '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$',
  description: 'an instance id (letters, digits, ".", "_", ":", "-"; at most 128)',
});
/** A dispatcher's id ("cluster/tag"). */
const DispatcherId = Type.String({
  pattern: '^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,63}$',
  description: 'a dispatcher id such as cluster/tag',
});
const Reason = Text({ maxLength: 4096 });
const LockToken = Type.String({
  pattern: '^[0-9]{1,10}\\.[A-Za-z0-9_-]{1,200}$',
  description: 'a per-lock token (GENERATION.MAC)',
});

const Size = Type.Union(
  [Type.Integer({ minimum: 0, maximum: REQUEST_LIMITS.maxBytes }), Text({ maxLength: 64 })],
  { description: 'bytes, or a size such as "4GiB" or "512MiB"' },
);
const Duration = Type.Union(
  [Type.Number({ minimum: 0, maximum: REQUEST_LIMITS.maxRunTimeMs / 1000 }), Text({ maxLength: 64 })],
  { description: 'seconds, or a duration such as "90s" or "1h30m"' },
);
const EnvMap = Dict(Text({ maxLength: 256 }), Text({ maxLength: 131072 }), 10000);
const Priority = Type.Integer({
  minimum: 0,
  maximum: 1000,
  description: 'a whole number from 0 to 1000 (higher first; 0 = not scheduled)',
});

export const RequestInput = Type.Object(
  {
    name: Type.Optional(Text({ maxLength: 256 })),
    image: Type.Optional(Nullable(Text({ maxLength: 1024 }))),
    command: Type.Array(Text({ maxLength: 131072 }), { minItems: 1, maxItems: 10000 }),
    env: Type.Optional(EnvMap),
    /** Environment values passed to the container and never shown back (see docs/OPERATIONS.md). */
    secret_env: Type.Optional(EnvMap),
    cwd: Type.Optional(Nullable(Text({ maxLength: 4096 }))),
    vcpus: Type.Optional(
      Type.Union(
        [
          Type.Number({ minimum: REQUEST_LIMITS.minVcpus, maximum: REQUEST_LIMITS.maxVcpus }),
          Text({ maxLength: 32 }),
        ],
        {
          description: `CPUs from ${REQUEST_LIMITS.minVcpus} to ${REQUEST_LIMITS.maxVcpus} such as 1 or 0.5 (a number or a string)`,
        },
      ),
    ),
    ram: Type.Optional(Size),
    scratch: Type.Optional(Size),
    gpus: Type.Optional(Type.Integer({ minimum: 0, maximum: 64 })),
    preemptible: Type.Optional(Type.Boolean()),
    opportunistic: Type.Optional(
      Type.Boolean({
        description:
          'may run in capacity other containers reserve but do not use; frozen, then requeued, when they claim it back',
      }),
    ),
    ram_retry_factor: Type.Optional(
      Nullable(
        Type.Number({
          minimum: REQUEST_LIMITS.minRamRetryFactor,
          maximum: REQUEST_LIMITS.maxRamRetryFactor,
          description: `after an OOM kill, the retry asks for ram × this (${REQUEST_LIMITS.minRamRetryFactor} to ${REQUEST_LIMITS.maxRamRetryFactor}; null: the same ram)`,
        }),
      ),
    ),
    max_run_time: Type.Optional(Nullable(Duration)),
    run_after: Type.Optional(Nullable(Text({ maxLength: 64, description: 'RFC 3339 time' }))),
    instance_types: Type.Optional(
      Nullable(Type.Array(Text({ maxLength: 64 }), { minItems: 1, maxItems: 100 })),
    ),
    priority: Type.Optional(Priority),
    container_count_max: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
    max_temp_retries: Type.Optional(Type.Integer({ minimum: 0, maximum: 1000 })),
    retry_on_failure: Type.Optional(Type.Boolean()),
    labels: Type.Optional(
      Type.Record(Type.String({ maxLength: 63 }), Type.String({ maxLength: 128 }), {
        maxProperties: 20,
        description: 'key: value labels for cost allocation, e.g. {"team": "genomics"} (docs/COST.md)',
      }),
    ),
  },
  { additionalProperties: false, description: 'A container request' },
);
export type RequestInputBody = Static<typeof RequestInput>;

export const BatchInput = Type.Object(
  { requests: Type.Array(RequestInput, { minItems: 1, maxItems: 1000 }) },
  { additionalProperties: false },
);

const Limit = Type.String({ pattern: '^[0-9]{1,4}$', description: 'page size, 1-1000 (default 100)' });
const PriorityQuery = Type.String({ pattern: '^[0-9]{1,4}$', description: 'a priority, 0-1000' });
const Cursor = Type.String({
  pattern: '^[A-Za-z0-9_-]{1,200}$',
  description: 'a cursor from a previous page',
});
const Owner = Type.String({
  minLength: 1,
  maxLength: 256,
  pattern: '^[A-Za-z0-9._@:-]+$',
  description: 'an owner name (letters, digits, ".", "_", "@", ":", "-")',
});

export const RequestListQuery = Type.Object(
  {
    state: Type.Optional(Type.Union([Type.Literal('Committed'), Type.Literal('Final')])),
    owner: Type.Optional(Owner),
    priority_min: Type.Optional(PriorityQuery),
    priority_max: Type.Optional(PriorityQuery),
    name: Type.Optional(Text({ maxLength: 256 })),
    cursor: Type.Optional(Cursor),
    limit: Type.Optional(Limit),
  },
  { additionalProperties: false },
);

export const ContainerStateSchema = Type.Union(CONTAINER_STATES.map((s) => Type.Literal(s)));

export const ContainerListQuery = Type.Object(
  {
    state: Type.Optional(ContainerStateSchema),
    owner: Type.Optional(Owner),
    request_id: Type.Optional(RequestId),
    priority_min: Type.Optional(PriorityQuery),
    priority_max: Type.Optional(PriorityQuery),
    node_id: Type.Optional(NodeId),
    cursor: Type.Optional(Cursor),
    limit: Type.Optional(Limit),
  },
  { additionalProperties: false },
);

export const UsageQuery = Type.Object(
  {
    by: Type.Optional(Type.Union([Type.Literal('name'), Type.Literal('owner')])),
    owner: Type.Optional(Owner),
    since: Type.Optional(
      Text({ maxLength: 64, description: 'an RFC 3339 time: containers finished since then' }),
    ),
  },
  { additionalProperties: false },
);

const params = <T extends TSchema>(id: T) => Type.Object({ id }, { additionalProperties: false });
export const RequestParams = params(RequestId);
export const ContainerParams = params(ContainerId);
export const NodeParams = params(NodeId);
export const InstanceParams = params(InstanceId);

/** An operator's request on an instance: `freeze` only with hold (berth instance hold --freeze). */
export const InstanceActionBody = Type.Object(
  {
    freeze: Type.Optional(
      Type.Boolean({
        description:
          "hold only: also freeze the instance's Running containers (berth pause's flags); its run or drain resumes them",
      }),
    ),
  },
  { additionalProperties: false },
);

export const InstanceActionParams = Type.Object(
  {
    id: InstanceId,
    action: Type.Union([
      Type.Literal('hold'),
      Type.Literal('drain'),
      Type.Literal('run'),
      Type.Literal('kill'),
    ]),
  },
  { additionalProperties: false },
);

export const PriorityPatch = Type.Object({ priority: Priority }, { additionalProperties: false });

export const FailureClassSchema = Type.Union([
  Type.Literal('user'),
  Type.Literal('temp'),
  Type.Literal('perm'),
]);

export const CancelBody = Type.Object(
  {
    class: Type.Optional(FailureClassSchema),
    reason: Type.Optional(Reason),
    /** false: no retry can succeed (e.g. an image that does not exist); the request ends at once. */
    retryable: Type.Optional(Type.Boolean()),
    /** The cloud reclaimed the instance (a spot interruption, said by its agent): the retry counts it. */
    interrupted: Type.Optional(Type.Boolean()),
    /** Its agent reclaimed an opportunistic container: retried at once, counting no failure. */
    reclaimed: Type.Optional(Type.Boolean()),
    dispatcher_id: Type.Optional(DispatcherId),
    lock_token: Type.Optional(LockToken),
  },
  { additionalProperties: false },
);

export const CancelRequestBody = Type.Object(
  { reason: Type.Optional(Reason) },
  { additionalProperties: false },
);

export const LockBody = Type.Object(
  {
    dispatcher_id: DispatcherId,
    ids: Type.Optional(Type.Array(ContainerId, { maxItems: 10000 })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 10000 })),
  },
  { additionalProperties: false },
);

export const UnlockBody = Type.Object(
  { dispatcher_id: DispatcherId, reason: Text({ minLength: 1, maxLength: 4096 }) },
  { additionalProperties: false },
);

export const AssignBody = Type.Object(
  { dispatcher_id: DispatcherId, instance_id: InstanceId, node_id: Type.Optional(Nullable(NodeId)) },
  { additionalProperties: false },
);

export const TokenBody = Type.Object({ lock_token: LockToken }, { additionalProperties: false });

/** Counters fit a PostgreSQL bigint and a JavaScript number exactly. */
const Count = Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER });
const Seconds = Type.Number({ minimum: 0, maximum: 1e12 });

/** What a container used, as its agent reports it at the exit. */
export const UsageSchema = Type.Object(
  { peak_ram: Count, cpu_seconds: Seconds, wall_ms: Count, scratch_peak: Type.Optional(Count) },
  { additionalProperties: false },
);
export type Usage = Static<typeof UsageSchema>;

/** A running container's latest usage sample, sent with the agent's ping. */
export const UsageSampleSchema = Type.Object(
  { cpu_seconds: Seconds, ram: Count, peak_ram: Count },
  { additionalProperties: false },
);
export type UsageSample = Static<typeof UsageSampleSchema>;

/** How a container exited, as its agent reports it (complete, or an "exit" report). */
const ExitFields = {
  exit_code: Type.Integer({ minimum: -1, maximum: 255 }),
  oom_killed: Type.Optional(Type.Boolean()),
  usage: Type.Optional(Nullable(UsageSchema)),
  reason: Type.Optional(Reason),
};

export const CompleteBody = Type.Object(
  { lock_token: LockToken, ...ExitFields },
  { additionalProperties: false },
);
export type CompleteBodyT = Static<typeof CompleteBody>;

export const LogChunkSchema = Type.Object(
  {
    seq: Type.Integer({ minimum: 0, maximum: 2147483647 }),
    stream: Type.Union([Type.Literal('stdout'), Type.Literal('stderr'), Type.Literal('system')]),
    data: Text({ maxLength: 1048576 }),
  },
  { additionalProperties: false },
);
export type LogChunkBody = Static<typeof LogChunkSchema>;

export const LogAppendBody = Type.Object(
  { lock_token: LockToken, chunks: Type.Array(LogChunkSchema, { maxItems: 10000 }) },
  { additionalProperties: false },
);

/**
 * An agent's reports about the containers of its node, in one call: starts, log chunks, exits and
 * cancels (each with the container's per-lock token), group-committed with other agents' reports and
 * answered per report (src/store/reports.ts).
 */
export const ReportSchema = Type.Union(
  [
    Type.Object(
      { kind: Type.Literal('start'), id: ContainerId, lock_token: LockToken },
      { additionalProperties: false },
    ),
    Type.Object(
      {
        kind: Type.Literal('logs'),
        id: ContainerId,
        lock_token: LockToken,
        chunks: Type.Array(LogChunkSchema, { maxItems: 10000 }),
      },
      { additionalProperties: false },
    ),
    Type.Object(
      { kind: Type.Literal('exit'), id: ContainerId, lock_token: LockToken, ...ExitFields },
      { additionalProperties: false },
    ),
    Type.Object(
      {
        kind: Type.Literal('cancel'),
        id: ContainerId,
        lock_token: LockToken,
        class: Type.Union([Type.Literal('temp'), Type.Literal('perm')]),
        reason: Reason,
        /** false: no retry can succeed (e.g. an image that does not exist); the request ends at once. */
        retryable: Type.Optional(Type.Boolean()),
        /** The cloud reclaimed the instance (a spot interruption): the retry counts it. */
        interrupted: Type.Optional(Type.Boolean()),
        /** Its agent reclaimed an opportunistic container: retried at once, counting no failure. */
        reclaimed: Type.Optional(Type.Boolean()),
      },
      { additionalProperties: false },
    ),
  ],
  {
    description:
      'a report with kind, id and lock_token: "start"; "logs" with chunks; "exit" with exit_code (and oom_killed, usage, reason); "cancel" with class (temp or perm) and reason (and retryable, interrupted, reclaimed)',
  },
);
export type ReportBody = Static<typeof ReportSchema>;

export const ReportsBody = Type.Object(
  { reports: Type.Array(ReportSchema, { minItems: 1, maxItems: 10000 }) },
  { additionalProperties: false },
);

export const LogQuery = Type.Object(
  {
    after: Type.Optional(
      Type.String({ pattern: '^-?[0-9]{1,10}$', description: 'a log sequence number, -1 to 2147483647' }),
    ),
    limit: Type.Optional(Limit),
    follow: Type.Optional(
      Type.Union([Type.Literal('true'), Type.Literal('false'), Type.Literal('1'), Type.Literal('0')]),
    ),
  },
  { additionalProperties: false },
);

const Name64 = Type.String({
  minLength: 1,
  maxLength: 64,
  pattern: '^[A-Za-z0-9][A-Za-z0-9._:/@-]*$',
  description: 'a name of letters, digits, ".", "_", ":", "/", "@", "-"',
});

export const NodeCreateBody = Type.Object(
  { cluster: Name64, dispatcher_tag: Name64, instance_id: InstanceId, instance_type: Name64 },
  { additionalProperties: false },
);

/** What an agent says about itself at registration: flat facts (stored as jsonb, shown to admins). */
const InfoValue = Type.Union([
  Text({ maxLength: 4096 }),
  Type.Number(),
  Type.Boolean(),
  Type.Null(),
  Type.Array(Type.Union([Text({ maxLength: 4096 }), Type.Number(), Type.Boolean()]), { maxItems: 256 }),
]);

export const RegisterBody = Type.Object(
  {
    node_id: NodeId,
    secret: Type.String({ minLength: 1, maxLength: 256, pattern: '^[A-Za-z0-9_-]+$' }),
    info: Type.Optional(Dict(Type.String({ maxLength: 64, pattern: '^[A-Za-z0-9_.-]+$' }), InfoValue, 64)),
    /**
     * A one-shot agent's container (`berth agent --once`): when it is Locked to this node, the answer
     * carries its start order, already marked started (Running), saving the first ping and the start report.
     */
    once: Type.Optional(ContainerId),
  },
  { additionalProperties: false },
);

export type RegisterBodyT = Static<typeof RegisterBody>;

/** A SLURM job's one-shot agent asking for the next container its allocation fits (nothing to say). */
export const NextBody = Type.Object({}, { additionalProperties: false });

export const NodeReportStateSchema = Type.Union([
  Type.Literal('idle'),
  Type.Literal('busy'),
  Type.Literal('draining'),
  Type.Literal('drained'),
]);

export const PingBody = Type.Object(
  {
    state: NodeReportStateSchema,
    running: Type.Optional(Type.Array(ContainerId, { maxItems: 10000 })),
    wait_ms: Type.Optional(Type.Integer({ minimum: 0, maximum: 60000 })),
    /** The cloud's notice about the instance (spot interruption, rebalance), kept in the node's info.notice. */
    notice: Type.Optional(Text({ minLength: 1, maxLength: 1000 })),
    /** The latest usage sample of each running container (stored on the container until its exit). */
    usage: Type.Optional(Dict(Type.String({ pattern: ContainerId.pattern }), UsageSampleSchema, 10000)),
    /** The running containers the agent holds frozen (berth pause; src/store/pause.ts). */
    paused: Type.Optional(Type.Array(ContainerId, { maxItems: 10000 })),
    /**
     * Whether the agent can claim lent room back: its pressure watcher runs (src/agent/pressure.ts). Stored
     * on the node (absent: unchanged; false until said); only such nodes' instances lend to opportunistic
     * containers (src/dispatch/scheduler/opportunistic.ts).
     */
    reclaims: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type PingBodyT = Static<typeof PingBody>;

export const TokenCreateBody = Type.Object(
  {
    scope: Type.Union([Type.Literal('admin'), Type.Literal('user'), Type.Literal('dispatcher')]),
    owner: Owner,
    description: Type.Optional(Text({ maxLength: 1024 })),
    /** The highest priority this token may give a request (submit or change); absent = 1000. */
    max_priority: Type.Optional(Type.Integer({ minimum: 0, maximum: 1000 })),
  },
  { additionalProperties: false },
);

export const TokenIdParams = Type.Object(
  { id: Type.String({ pattern: '^[0-9]{1,15}$', description: 'a token id (a number)' }) },
  { additionalProperties: false },
);
