-- Which runtime saved a kept checkpoint whole (`vm`: the guest's machine state; `process` with CRIU: the
-- process tree's images), or null when the container wrote it itself ($BERTH_CHECKPOINT_DIR). The agent
-- resumes a whole state only from a checkpoint its own runtime saved whole (src/agent/runner.ts,
-- startOrResume): the files a container wrote must never be loaded as a machine state by QEMU or restored
-- as process images by criu, which runs as root, whatever runtime the next attempt lands on.
ALTER TABLE checkpoints ADD COLUMN whole_state text;
