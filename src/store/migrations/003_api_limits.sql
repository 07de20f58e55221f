-- Secret environment values (passed to the container, never returned by the API) and the highest
-- priority a token may give a request.

ALTER TABLE container_requests ADD COLUMN secret_env jsonb NOT NULL DEFAULT '{}';

ALTER TABLE tokens ADD COLUMN max_priority integer CHECK (max_priority BETWEEN 0 AND 1000);
