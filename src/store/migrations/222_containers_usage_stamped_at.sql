-- When a Running container's usage sample last stamped the change feed (Containers.recordUsage). Agents
-- send a sample of every running container with each ping (every ping_wait at the latest, more often on a
-- busy node); stamping each one was a non-HOT row version and a change-feed row for the dispatcher to read
-- per container and ping. A sample now stamps only when it is the first, when the last stamp is
-- USAGE_STAMP_INTERVAL old, or when the peak memory grew by a sixteenth of the request since the stamped
-- sample (its peak kept here too); the others update `usage` alone (HOT when the page has room). Not indexed.
ALTER TABLE containers ADD COLUMN usage_stamped_at timestamptz, ADD COLUMN usage_stamped_peak bigint;
