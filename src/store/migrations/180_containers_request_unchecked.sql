-- Issue 12 (batched submissions): the foreign key containers.request_id → container_requests.id cost a
-- check per inserted container (a FOR KEY SHARE lookup of the request, a row lock written to the WAL: about
-- 0.01 ms and 54 bytes per submission, a quarter of a batch's statement time). It guards nothing a writer
-- can get wrong: a container is only ever inserted by the store from its request's row in the same statement
-- (src/store/requests.ts: the submission inserts both; src/store/transitions/end.ts: a retry inserts the next
-- container from the UPDATE ... RETURNING of its request), and no request is ever deleted. Dropping a
-- constraint takes a brief lock and rewrites nothing: safe on a populated database.
ALTER TABLE containers DROP CONSTRAINT IF EXISTS containers_request_id_fkey;
