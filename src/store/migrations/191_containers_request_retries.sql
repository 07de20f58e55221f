-- Issue 12 (batched submissions): a request's first container no longer takes an entry in an index by
-- request. Its id is derived from its request's (firstContainerId, src/model/ids.ts: "c-" and the request
-- id's tail), so a read by request finds it through the primary key; the index keeps only the containers
-- whose id is not so derived: retries, and first containers submitted before this migration. Every reader of
-- a request's containers goes through OF_REQUEST (src/store/records.ts), whose second arm repeats this
-- predicate word for word so that the planner can prove the index usable.
CREATE INDEX containers_request_others ON containers (request_id) WHERE id <> ('c-' || substr(request_id, 3));
DROP INDEX IF EXISTS containers_request;
