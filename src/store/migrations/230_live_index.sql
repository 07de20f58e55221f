-- Issue 12 (the peer ratio, session 17): containers_node (node_id) and containers_locked_by (locked_by)
-- were two partial indexes over one predicate (state IN ('Locked', 'Running')): each of the lifecycle's
-- two updates inside it (lock and assign, start) wrote an entry into both. One index on
-- (node_id, locked_by) takes one entry instead of two. The reads by node (the agent's: its containers to
-- start, its running ones; a node's drain; the dashboard's instances) use its first column as before. The
-- reads by holder (the dispatcher's snapshot, its release of unplaced locks, the SLURM queue) test its
-- second column against every entry: the index holds only Locked and Running containers, the live set
-- that a cluster's one dispatcher holds anyway (test/store/live-index.test.ts checks both plans).
-- Building it reads the whole table once (about a second at a million rows), writes wait meanwhile.
CREATE INDEX containers_live ON containers (node_id, locked_by) WHERE state IN ('Locked', 'Running');
DROP INDEX IF EXISTS containers_node;
DROP INDEX IF EXISTS containers_locked_by;
