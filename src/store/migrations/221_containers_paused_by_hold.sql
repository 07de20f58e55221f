-- berth instance hold ID --freeze (issue 16 item 4): holding an instance can freeze what runs on it. The
-- hold asks each of its Running containers to pause through the pause flags of berth pause
-- (src/store/pause.ts), and marks the ones it asked for here, so that `berth instance run|drain ID` resumes
-- only what the hold froze: a container a user paused stays paused. A user's own pause or resume of a
-- container the hold froze takes it over (the mark is cleared), and the instance's run leaves it alone.
ALTER TABLE containers ADD COLUMN paused_by_hold boolean NOT NULL DEFAULT false;
