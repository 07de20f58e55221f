-- What a SLURM job was given (its resource options: cpus, mem, tmp, gpus, time, partition, account,
-- constraint), recorded on its node record when the job is submitted, with the reuse limits and how many
-- containers the job has run ('runs'). A job SLURM started asks, after its container, for the next Locked
-- container of its dispatcher whose own (not yet started) job asks for no more: src/store/transitions/move.ts.
-- Null on cloud nodes.
ALTER TABLE nodes ADD COLUMN allocation jsonb;
