-- The dispatcher's side: why each waiting container waits, and each dispatcher's view of its
-- instances (for `berth instances` and the dashboard) with the operator's requests for them.

ALTER TABLE containers ADD COLUMN scheduling_status text;

ALTER TABLE dispatchers ADD COLUMN pid integer;
ALTER TABLE dispatchers ADD COLUMN hostname text;

CREATE TABLE instances (
  id text PRIMARY KEY,
  cluster text NOT NULL,
  dispatcher_tag text NOT NULL,
  type text NOT NULL,
  provider_type text NOT NULL,
  price double precision NOT NULL,
  state text NOT NULL,
  idle_behavior text NOT NULL,
  node_id text,
  containers integer NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL,
  state_since timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  -- what an operator asked for (berth instance hold|drain|run|kill); the dispatcher applies and clears it
  requested_idle_behavior text CHECK (requested_idle_behavior IN ('run', 'hold', 'drain')),
  kill_requested boolean NOT NULL DEFAULT false
);
CREATE INDEX instances_cluster ON instances (cluster, dispatcher_tag);

ALTER TABLE nodes ALTER COLUMN instance_id DROP NOT NULL;
