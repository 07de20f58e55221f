-- Incremental snapshots (SEAMS §2): every change the scheduler cares about (state, priority, lock,
-- assignment, run_after) stamps the container with the id of the transaction that made it. A dispatcher
-- asks for the containers stamped since the oldest transaction still running at its last read
-- (pg_snapshot_xmin): a transaction id, unlike a sequence value, cannot commit "behind" the cursor, so
-- no change is ever skipped (a change in flight at one read is read again at the next).
-- A trigger, not each statement, stamps the row: no writer can forget it.

ALTER TABLE containers ADD COLUMN change_xid xid8 NOT NULL DEFAULT pg_current_xact_id();

CREATE FUNCTION berth_container_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.change_xid := pg_current_xact_id();
  RETURN NEW;
END $$;

CREATE TRIGGER containers_changed BEFORE UPDATE ON containers FOR EACH ROW
  WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.priority IS DISTINCT FROM NEW.priority
     OR OLD.locked_by IS DISTINCT FROM NEW.locked_by OR OLD.lock_count IS DISTINCT FROM NEW.lock_count
     OR OLD.instance_id IS DISTINCT FROM NEW.instance_id OR OLD.run_after IS DISTINCT FROM NEW.run_after)
  EXECUTE FUNCTION berth_container_changed();

CREATE INDEX containers_change ON containers (change_xid);
-- Queued containers waiting for their run_after (retry backoff, "not before"): which become runnable
-- between two reads, and when the next one does.
CREATE INDEX containers_run_after ON containers (run_after) WHERE state = 'Queued' AND run_after IS NOT NULL;
