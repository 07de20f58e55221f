-- The SLURM move statement (src/store/transitions/move.ts) takes, for an allocation that ran its container,
-- the first of its dispatcher's Locked containers in Berth's order (priority, then queue time) whose own
-- job has not started and which fits. Without an index in that order, it read every Locked container of the
-- dispatcher and sorted them: ~15 ms with 2,000, ~75 ms with 10,000 (bench/slurm-move.ts). In this order,
-- it stops at the first that fits. Only Locked rows enter it.
CREATE INDEX containers_locked_order ON containers (locked_by, priority DESC, queued_at, id) WHERE state = 'Locked';
