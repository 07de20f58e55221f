-- The scheduler's side (DESIGN §6.2): how often a container's request was interrupted on spot instances,
-- so that after max_spot_interruptions a preemptible container runs on demand. A retry carries its
-- request's count forward.
ALTER TABLE containers ADD COLUMN interruptions integer NOT NULL DEFAULT 0;
