-- Whether a node's agent can claim lent room back (issue 16, audit of 2026-12-07): its pressure watcher
-- runs (src/agent/pressure.ts), so it freezes and requeues opportunistic containers when a guaranteed one
-- grows back into what it lent. An agent without usable cgroups runs no watcher yet still reports usage,
-- and the scheduler lent its room to borrowers that had no way out. The agent says so in its ping
-- (`reclaims`); the dispatcher carries it into the scheduler's snapshot, and only instances whose node
-- reclaims lend (src/dispatch/scheduler/opportunistic.ts). false until the agent says otherwise: an older
-- agent, or one whose watcher has not started, lends nothing.
ALTER TABLE nodes ADD COLUMN reclaims boolean NOT NULL DEFAULT false;
