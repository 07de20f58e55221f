-- Status groups in parts (review of issue 12): a container's queue position was found by
-- array_position over its whole group's members, once per row read, and a group holds every container
-- waiting for one reason (a whole queue behind max_instances). At 300k waiting containers in one group
-- a listing's first page took ~1.4 s of database time (the 6 MB array detoasted and scanned per row).
-- Now a group's members are split by a hash of the container id into `parts` parts (a power of two, so
-- that a part holds ~64 members): a reader finds a container's part by its id
-- (hashtext(id) & (parts - 1)) and scans only that part. Containers still point at the group, so a pass
-- that moves the head of the queue still rewrites the group's parts, not the waiting containers.
-- The status text is no longer made in SQL: the listings read [position, higher-priority ahead, reason]
-- (queuedStatusSql, src/store/records.ts) and queuedText (src/dispatch/scheduler/statuses.ts) makes it.
CREATE TABLE status_group_parts (
  group_id bigint NOT NULL REFERENCES status_groups (id) ON DELETE CASCADE,
  part integer NOT NULL,
  members text[] NOT NULL,
  positions integer[] NOT NULL,
  higher_ahead integer[] NOT NULL,
  PRIMARY KEY (group_id, part)
);

ALTER TABLE status_groups ADD COLUMN parts integer NOT NULL DEFAULT 1;
-- Existing groups become one part each (parts = 1: every id's part is 0).
INSERT INTO status_group_parts (group_id, part, members, positions, higher_ahead)
  SELECT id, 0, members, positions, higher_ahead FROM status_groups;
ALTER TABLE status_groups DROP COLUMN members, DROP COLUMN positions, DROP COLUMN higher_ahead;
DROP FUNCTION berth_scheduling_status(bigint, text, text);
