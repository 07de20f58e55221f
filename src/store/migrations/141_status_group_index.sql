-- containers.status_group references status_groups ON DELETE SET NULL (060_status_groups.sql), with no
-- index on the referencing column: every status group the dispatcher drops (a reason no container waits
-- for any more, PgQueue.setWaiting) made PostgreSQL scan the whole containers table to clear the
-- references, once per dropped group (seconds at a million rows). Only waiting containers carry a group,
-- so the index is partial: the lifecycle's other row versions do not enter it.
CREATE INDEX containers_status_group ON containers (status_group) WHERE status_group IS NOT NULL;
