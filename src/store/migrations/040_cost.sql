-- What everything costs (docs/COST.md): instance records that outlive their instance, labels on requests,
-- and the indexes the cost queries read through.

-- Instances keep their row after they are gone (gone_at set), so their cost can be computed later.
-- The resources are the type's when the instance was created (a type may leave the configuration).
ALTER TABLE instances ADD COLUMN preemptible boolean NOT NULL DEFAULT false;
ALTER TABLE instances ADD COLUMN vcpus double precision;
ALTER TABLE instances ADD COLUMN ram bigint;
ALTER TABLE instances ADD COLUMN scratch bigint;
ALTER TABLE instances ADD COLUMN gpus integer;
-- when its agent first registered (booting until then)
ALTER TABLE instances ADD COLUMN ready_at timestamptz;
-- when billing ended: the driver accepted its destroy, or it was found gone from the cloud's list
ALTER TABLE instances ADD COLUMN ended_at timestamptz;
-- when it left the dispatcher's view: set = a record of the past, not a live instance
ALTER TABLE instances ADD COLUMN gone_at timestamptz;
-- the last time a dispatcher saw it live (refreshed about once a minute): the end of an instance that
-- vanished while no dispatcher watched
ALTER TABLE instances ADD COLUMN seen_at timestamptz;
CREATE INDEX instances_live ON instances (cluster, dispatcher_tag) WHERE gone_at IS NULL;
CREATE INDEX instances_created ON instances (created_at);

-- Labels on requests (team=x): cost is summed by label, and labels the containers of a new instance agree
-- on become its tags (cloud cost allocation).
ALTER TABLE container_requests ADD COLUMN labels jsonb NOT NULL DEFAULT '{}';

-- The containers that ran on an instance (the cost of an instance is divided among them).
CREATE INDEX containers_instance_run ON containers (instance_id) WHERE started_at IS NOT NULL;
-- Requests that ended recently (the dashboard's "failed in the last 24 h").
CREATE INDEX container_requests_final ON container_requests (updated_at) WHERE state = 'Final';

-- Each dispatcher's published view of its limits: instance types, the scheduler's caps, and the cloud's
-- errors in force (quota, capacity, rate limit), for the dashboard.
ALTER TABLE dispatchers ADD COLUMN view jsonb;
