-- Statuses by group (issue 12, SEAMS §3): most waiting containers wait for a reason they share with
-- thousands of others, and only their queue position differs. A dispatcher stores one row per reason,
-- with its waiting containers in queue order (and each one's position and count of higher-priority
-- containers ahead), and each container points at its row: a pass in which nothing changed writes
-- nothing, and a pass over 10k containers waiting for one reason writes one row (plus the pointers of
-- containers that moved to another group). A row is a slot the dispatcher reuses when a reason's text
-- changes (it names the container at the head, which moves): its members keep pointing at it. The
-- text is made when read (berth_scheduling_status).
-- Texts of containers that do not wait in the queue (placed, unlocked, cancelled) stay in
-- containers.scheduling_status.

CREATE TABLE status_groups (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  dispatcher_id text NOT NULL,
  slot integer NOT NULL,
  reason text NOT NULL,
  members text[] NOT NULL,
  positions integer[] NOT NULL,
  higher_ahead integer[] NOT NULL,
  UNIQUE (dispatcher_id, slot)
);

ALTER TABLE containers ADD COLUMN status_group bigint REFERENCES status_groups (id) ON DELETE SET NULL;

-- A container's status text: "queue position N[; M higher-priority container(s) ahead]; <reason>" while
-- its group lists it (the format of queuedText in src/dispatch/scheduler/statuses.ts: a test compares
-- them), else its own text.
CREATE FUNCTION berth_scheduling_status(grp bigint, container text, own text) RETURNS text
  LANGUAGE sql STABLE AS $$
  SELECT coalesce(
    (SELECT 'queue position ' || g.positions[i]
        || CASE g.higher_ahead[i] WHEN 0 THEN '' WHEN 1 THEN '; 1 higher-priority container ahead'
             ELSE '; ' || g.higher_ahead[i] || ' higher-priority containers ahead' END
        || '; ' || g.reason
       FROM status_groups g CROSS JOIN LATERAL array_position(g.members, container) AS i
      WHERE grp IS NOT NULL AND g.id = grp AND i IS NOT NULL),
    own)
$$;
