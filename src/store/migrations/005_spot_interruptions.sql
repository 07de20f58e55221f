-- How many earlier attempts of a container's request ended because the cloud reclaimed their spot instance
-- (the agent's cancel with `interrupted: true`). A retry carries its predecessor's count, plus one when that
-- one was interrupted; the scheduler runs a preemptible container whose count reached the scheduler key
-- `on_demand_after_interruptions` on on-demand types only (docs/SCHEDULER.md).
ALTER TABLE containers ADD COLUMN spot_interruptions integer NOT NULL DEFAULT 0;
