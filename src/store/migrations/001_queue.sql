-- The queue: container requests, containers (attempts), their events and logs; tokens; nodes;
-- dispatchers. Times that scheduling depends on are written from the application's clock.

CREATE TABLE settings (
  key text PRIMARY KEY,
  value text NOT NULL
);

CREATE TABLE tokens (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  -- sha256 of the secret; the secret itself is only in the response that created it.
  hash text NOT NULL UNIQUE,
  -- first characters of the secret, for people to tell tokens apart ("bt_3fa9...").
  prefix text NOT NULL,
  scope text NOT NULL CHECK (scope IN ('admin', 'user', 'dispatcher', 'node')),
  owner text NOT NULL,
  node_id text,
  dispatcher_id text,
  description text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL,
  last_used_at timestamptz,
  revoked_at timestamptz
);

CREATE TABLE container_requests (
  id text PRIMARY KEY,
  owner text NOT NULL,
  name text NOT NULL DEFAULT '',
  image text,
  command jsonb NOT NULL,
  env jsonb NOT NULL DEFAULT '{}',
  cwd text,
  vcpus double precision NOT NULL,
  ram bigint NOT NULL,
  scratch bigint NOT NULL DEFAULT 0,
  gpus integer NOT NULL DEFAULT 0,
  preemptible boolean NOT NULL DEFAULT false,
  max_run_time_ms bigint,
  run_after timestamptz,
  instance_types text[],
  priority integer NOT NULL CHECK (priority BETWEEN 0 AND 1000),
  container_count_max integer NOT NULL CHECK (container_count_max >= 1),
  max_temp_retries integer NOT NULL CHECK (max_temp_retries >= 0),
  retry_on_failure boolean NOT NULL DEFAULT true,
  state text NOT NULL CHECK (state IN ('Committed', 'Final')),
  container_id text,
  -- attempts that count against container_count_max (non-zero exits and perm failures included)
  attempts integer NOT NULL DEFAULT 0,
  temp_failures integer NOT NULL DEFAULT 0,
  -- outcome once Final: success, failed, cancelled
  outcome text,
  final_reason text,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);
CREATE INDEX container_requests_owner ON container_requests (owner, id);
CREATE INDEX container_requests_state ON container_requests (state, id);

CREATE TABLE containers (
  id text PRIMARY KEY,
  request_id text NOT NULL REFERENCES container_requests (id),
  owner text NOT NULL,
  attempt integer NOT NULL,
  state text NOT NULL CHECK (state IN ('Queued', 'Locked', 'Running', 'Complete', 'Cancelled')),
  priority integer NOT NULL,
  vcpus double precision NOT NULL,
  ram bigint NOT NULL,
  scratch bigint NOT NULL,
  gpus integer NOT NULL,
  preemptible boolean NOT NULL,
  instance_types text[],
  queued_at timestamptz NOT NULL,
  run_after timestamptz,
  locked_by text,
  -- incremented on every lock and unlock: a per-lock token is valid only for its generation
  lock_generation integer NOT NULL DEFAULT 0,
  lock_count integer NOT NULL DEFAULT 0,
  instance_id text,
  node_id text,
  started_at timestamptz,
  finished_at timestamptz,
  exit_code integer,
  oom_killed boolean,
  failure_class text CHECK (failure_class IN ('user', 'temp', 'perm')),
  runtime_status text,
  usage jsonb,
  log_seq integer NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);
-- The dispatcher's queue scan: runnable containers in priority order.
CREATE INDEX containers_queue ON containers (priority DESC, queued_at, id) WHERE state = 'Queued';
CREATE INDEX containers_locked_by ON containers (locked_by) WHERE state IN ('Locked', 'Running');
CREATE INDEX containers_node ON containers (node_id) WHERE state IN ('Locked', 'Running');
CREATE INDEX containers_request ON containers (request_id);
CREATE INDEX containers_owner ON containers (owner, id);
CREATE INDEX containers_state_id ON containers (state, id);

CREATE TABLE container_events (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  container_id text NOT NULL,
  at timestamptz NOT NULL,
  kind text NOT NULL,
  message text NOT NULL,
  data jsonb
);
CREATE INDEX container_events_container ON container_events (container_id, id);

CREATE TABLE log_chunks (
  container_id text NOT NULL,
  seq integer NOT NULL,
  stream text NOT NULL CHECK (stream IN ('stdout', 'stderr', 'system')),
  at timestamptz NOT NULL,
  data text NOT NULL,
  PRIMARY KEY (container_id, seq)
);

CREATE TABLE dispatchers (
  id text PRIMARY KEY,
  cluster text NOT NULL,
  tag text NOT NULL,
  started_at timestamptz NOT NULL,
  heartbeat_at timestamptz NOT NULL,
  stopped_at timestamptz
);

CREATE TABLE nodes (
  id text PRIMARY KEY,
  cluster text NOT NULL,
  dispatcher_tag text NOT NULL,
  instance_id text NOT NULL,
  instance_type text NOT NULL,
  state text NOT NULL CHECK (state IN ('registered', 'idle', 'busy', 'draining', 'drained', 'failed')),
  -- sha256 of the one-time bootstrap secret; cleared when the agent registers
  bootstrap_hash text,
  registered_at timestamptz,
  last_ping_at timestamptz,
  failed_reason text,
  info jsonb NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);
CREATE UNIQUE INDEX nodes_instance ON nodes (instance_id) WHERE state <> 'failed';
