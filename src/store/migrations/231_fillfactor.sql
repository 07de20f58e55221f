-- Issue 12 (the peer ratio, session 17): room on each page for the next versions of its rows. A container
-- is written four times (inserted Queued; Locked and assigned; Running; ended) and its request twice. With
-- pages filled at insert, every update's new version went to another page: heap_update then writes a row
-- lock record before it moves (Heap/LOCK) and the whole new tuple to the WAL. On the same page, it writes
-- no lock and only the part of the tuple that changed (PostgreSQL's prefix and suffix compression of a
-- same-page update), and a page's dead versions are pruned in place by the next update that needs room.
-- `bench peer`: 5,445 → 5,110 B of WAL a lifecycle with both tables at 50, 5,231 at 70 (docs/PERFORMANCE.md,
-- "Session 17"). Requests are wider (command, env) and updated once: 70. The cost is space: rows never
-- updated again leave their pages up to half empty (100,000 fresh containers: 5,000 pages, not 2,440).
-- Only pages written from now on keep the room; nothing is rewritten.
ALTER TABLE containers SET (fillfactor = 50);
ALTER TABLE container_requests SET (fillfactor = 70);
