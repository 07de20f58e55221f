-- Status groups with bases (issue 12, session 14): a part stores each member's queue position and count of
-- higher-priority containers ahead less its group's position_base and higher_ahead_base. When the head of
-- a long queue moves, every position moves by one: the writer (src/dispatch/status-parts.ts) moves the base
-- and leaves the parts alone, where it rewrote every part of the group (~0.5 s at 100k waiting, ~5 s at a
-- million). Readers add the bases (queuedStatusSql, src/store/records.ts). Existing groups: bases 0.
ALTER TABLE status_groups
  ADD COLUMN position_base integer NOT NULL DEFAULT 0,
  ADD COLUMN higher_ahead_base integer NOT NULL DEFAULT 0;
