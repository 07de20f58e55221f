-- Issue 12 (the peer ratio): the change feed's stamp (migration 020) is written by the transitions'
-- statements themselves (CHANGE_STAMP, src/store/change-stamp.ts), not by a BEFORE UPDATE trigger. A
-- BEFORE ROW trigger makes PostgreSQL lock each row before updating it (GetTupleForTrigger): a Heap/LOCK
-- WAL record and a call of the trigger function for each of a lifecycle's three updates of its container,
-- whether or not the trigger's WHEN holds (docs/PERFORMANCE.md, "Session 10 (h-store8)").
-- Still no writer can forget it: an update that changes what the feed watches without stamping (ad hoc SQL,
-- a new statement) is stamped by the AFTER trigger below, with a second update of the row. An AFTER
-- trigger takes no row lock, and its WHEN is false for every statement that stamps: it costs them nothing.
-- Dropping and creating a trigger only changes the catalog (a brief lock of the table, no rewrite).
DROP TRIGGER containers_changed ON containers;
DROP FUNCTION berth_container_changed();

CREATE FUNCTION berth_container_stamp_late() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE containers SET change_xid = pg_current_xact_id() WHERE id = NEW.id;
  RETURN NULL;
END $$;

CREATE TRIGGER containers_changed_unstamped AFTER UPDATE ON containers FOR EACH ROW
  WHEN ((OLD.state IS DISTINCT FROM NEW.state OR OLD.priority IS DISTINCT FROM NEW.priority
     OR OLD.locked_by IS DISTINCT FROM NEW.locked_by OR OLD.lock_count IS DISTINCT FROM NEW.lock_count
     OR OLD.instance_id IS DISTINCT FROM NEW.instance_id OR OLD.run_after IS DISTINCT FROM NEW.run_after)
    AND NEW.change_xid IS DISTINCT FROM pg_current_xact_id())
  EXECUTE FUNCTION berth_container_stamp_late();
