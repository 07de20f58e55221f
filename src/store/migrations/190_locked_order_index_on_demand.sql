-- The SLURM move's index (185_locked_order_index.sql) is made only where a SLURM dispatcher runs: its setup
-- calls prepareAllocationMoves (src/store/transitions/move.ts), the index's one owner. Every container that
-- enters Locked wrote an entry into it (~5 % of the lifecycle rate) on clusters whose move never reads it.
DROP INDEX IF EXISTS containers_locked_order;
