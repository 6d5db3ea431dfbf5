-- Timers fire for queued messages only (DueTimers), so their index holds
-- queued messages only: a lease or an outcome no longer adds an entry to
-- it, and its predicate is the query's, so that the planner reads it in
-- timer order and stops at the first timer not due, even when the
-- statistics have not yet seen a bulk ingest (before, a million freshly
-- ingested messages made it scan and sort the whole table).
DROP INDEX messages_timer;
CREATE INDEX messages_timer ON messages (timer_at) WHERE state = 'queued' AND timer_at IS NOT NULL;
