-- Issue 12 (store throughput): every transition writes an event row, five or more per container lifecycle,
-- and each row was entered in two indexes. Nothing reads events by id alone: `berth show`, the API's
-- event pages and the dispatcher's reclaim lookup read them by container (container_events_container:
-- container_id, id), and nothing references them. The identity column still numbers them in order; the
-- primary key's index goes.
ALTER TABLE container_events DROP CONSTRAINT container_events_pkey;
