-- Issue 16 (seed 004): opportunistic containers, growing memory after an OOM kill, and pause/resume.
-- `opportunistic`: the request may be placed into capacity other containers reserve but do not use, and
-- be frozen, requeued or killed when they claim it back (distinct from `preemptible`: spot machines).
-- `ram_retry_factor`: after an OOM kill the retry asks for ram × this factor (capped by the largest
-- instance type any live dispatcher offers); null: retried with the same ram.
ALTER TABLE container_requests ADD COLUMN opportunistic boolean NOT NULL DEFAULT false;
ALTER TABLE container_requests ADD COLUMN ram_retry_factor double precision
  CHECK (ram_retry_factor IS NULL OR ram_retry_factor BETWEEN 1 AND 8);
ALTER TABLE containers ADD COLUMN opportunistic boolean NOT NULL DEFAULT false;
-- Pause (berth pause): a flag on a Running container, not a state (DESIGN §3.2 keeps its five states).
-- `pause_wanted`: what the user asked (true: frozen, false: running); `paused`: what its agent reported.
ALTER TABLE containers ADD COLUMN pause_wanted boolean NOT NULL DEFAULT false;
ALTER TABLE containers ADD COLUMN paused boolean NOT NULL DEFAULT false;
