-- Issue 16: containers' own checkpoints ($BERTH_CHECKPOINT_DIR) kept by the API, so that the next attempt
-- of a request resumes from it on any instance (src/store/checkpoints.ts). One checkpoint per request,
-- replaced by a newer one, stored as a tar archive in chunks (as logs are: a row stays small); removed
-- with the request's last attempt: the trigger below drops it when the request becomes Final.
CREATE TABLE checkpoints (
  request_id text PRIMARY KEY REFERENCES container_requests (id) ON DELETE CASCADE,
  -- the attempt that wrote it, and the instance it ran on (the retry's `migrate` event names both)
  container_id text NOT NULL,
  instance_id text,
  bytes bigint NOT NULL CHECK (bytes >= 0),
  at timestamptz NOT NULL
);
CREATE TABLE checkpoint_chunks (
  request_id text NOT NULL REFERENCES checkpoints (request_id) ON DELETE CASCADE,
  seq integer NOT NULL,
  data bytea NOT NULL,
  PRIMARY KEY (request_id, seq)
);
-- A tar archive is often already compressed data: do not spend CPU on pglz (as for log chunks, 004).
ALTER TABLE checkpoint_chunks ALTER COLUMN data SET STORAGE EXTERNAL;

CREATE FUNCTION berth_checkpoint_forget() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM checkpoints WHERE request_id = NEW.id;
  RETURN NULL;
END $$;
CREATE TRIGGER container_requests_final AFTER UPDATE OF state ON container_requests FOR EACH ROW
  WHEN (NEW.state = 'Final' AND OLD.state IS DISTINCT FROM 'Final')
  EXECUTE FUNCTION berth_checkpoint_forget();
