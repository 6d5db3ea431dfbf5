-- Ordering keys (docs/design.md §6). The messages of one route with one ordering
-- key form a group: every message of the key on that route that is queued,
-- inflight or suspended, unless it left the order (order_skipped). A
-- member is one of three kinds:
--
-- active: the one claimable (queued and due, or retrying) or in flight.
--   A group has at most one.
-- suspended: waits for an operator; it blocks the members younger than it
--   (ordered_on_failure: block), never the older ones.
-- waiting: queued with no next_attempt_at, so in no claim range: a blocked
--   key costs the claims nothing.
--
-- A message joins as active when no member is older than it and none is
-- active; else it waits. The oldest waiting member becomes active (is
-- promoted) when no member is active and no suspended member is older than
-- it. The triggers below keep that up through every way a message changes:
-- ingest, outcomes, timers, operators, a move to another route.

-- 1: the message was suspended under ordered_on_failure: skip, or expired
-- while it waited; it no longer waits for its key nor blocks it, and a
-- resubmit to the same route delivers it on its own.
ALTER TABLE messages ADD COLUMN order_skipped INTEGER NOT NULL DEFAULT 0;

-- Due work is claimed from messages_queued: a waiting message has no place
-- in it (it is in messages_key_waiting), which also keeps a query for the
-- waiting messages of a key from ever reading a route's due ones.
DROP INDEX messages_queued;
CREATE INDEX messages_queued ON messages (route, priority, next_attempt_at)
    WHERE state = 'queued' AND next_attempt_at IS NOT NULL;

CREATE INDEX messages_key_active ON messages (route, ordering_key)
    WHERE ordering_key IS NOT NULL AND order_skipped = 0
      AND (state = 'inflight' OR (state = 'queued' AND next_attempt_at IS NOT NULL));
CREATE INDEX messages_key_suspended ON messages (route, ordering_key, seq)
    WHERE ordering_key IS NOT NULL AND order_skipped = 0 AND state = 'suspended';
CREATE INDEX messages_key_waiting ON messages (route, ordering_key, seq)
    WHERE ordering_key IS NOT NULL AND order_skipped = 0 AND state = 'queued' AND next_attempt_at IS NULL;

-- A new queued message waits when an older member of its group exists or
-- one is active.
CREATE TRIGGER messages_key_join AFTER INSERT ON messages
WHEN NEW.ordering_key IS NOT NULL AND NEW.order_skipped = 0 AND NEW.state = 'queued'
BEGIN
    UPDATE messages SET next_attempt_at = NULL
    WHERE seq = NEW.seq AND (
        EXISTS (SELECT 1 FROM messages AS a INDEXED BY messages_key_active
            WHERE a.route = NEW.route AND a.ordering_key = NEW.ordering_key AND a.seq <> NEW.seq
              AND a.ordering_key IS NOT NULL AND a.order_skipped = 0
              AND (a.state = 'inflight' OR (a.state = 'queued' AND a.next_attempt_at IS NOT NULL)))
        OR EXISTS (SELECT 1 FROM messages AS s INDEXED BY messages_key_suspended
            WHERE s.route = NEW.route AND s.ordering_key = NEW.ordering_key AND s.seq < NEW.seq
              AND s.ordering_key IS NOT NULL AND s.order_skipped = 0 AND s.state = 'suspended')
        OR EXISTS (SELECT 1 FROM messages AS w INDEXED BY messages_key_waiting
            WHERE w.route = NEW.route AND w.ordering_key = NEW.ordering_key AND w.seq < NEW.seq
              AND w.ordering_key IS NOT NULL AND w.order_skipped = 0 AND w.state = 'queued' AND w.next_attempt_at IS NULL));
END;

-- A message that comes back to a group (resubmitted) or into another one
-- (resubmitted to another route, or fallen back) joins it by the same
-- rule: it waits when an older member exists or one is active.
CREATE TRIGGER messages_key_rejoin AFTER UPDATE OF state, route ON messages
WHEN NEW.ordering_key IS NOT NULL AND NEW.order_skipped = 0
  AND NEW.state = 'queued' AND NEW.next_attempt_at IS NOT NULL
  AND (OLD.state = 'suspended' OR NEW.route <> OLD.route)
BEGIN
    UPDATE messages SET next_attempt_at = NULL
    WHERE seq = NEW.seq AND (
        EXISTS (SELECT 1 FROM messages AS a INDEXED BY messages_key_active
            WHERE a.route = NEW.route AND a.ordering_key = NEW.ordering_key AND a.seq <> NEW.seq
              AND a.ordering_key IS NOT NULL AND a.order_skipped = 0
              AND (a.state = 'inflight' OR (a.state = 'queued' AND a.next_attempt_at IS NOT NULL)))
        OR EXISTS (SELECT 1 FROM messages AS s INDEXED BY messages_key_suspended
            WHERE s.route = NEW.route AND s.ordering_key = NEW.ordering_key AND s.seq < NEW.seq
              AND s.ordering_key IS NOT NULL AND s.order_skipped = 0 AND s.state = 'suspended')
        OR EXISTS (SELECT 1 FROM messages AS w INDEXED BY messages_key_waiting
            WHERE w.route = NEW.route AND w.ordering_key = NEW.ordering_key AND w.seq < NEW.seq
              AND w.ordering_key IS NOT NULL AND w.order_skipped = 0 AND w.state = 'queued' AND w.next_attempt_at IS NULL));
END;

-- An active or suspended member that stops being one (delivered, discarded,
-- suspended, skipped, moved to another route, waiting after a resubmit)
-- lets the oldest waiting member of its group go, unless a member is
-- active or a suspended one is older than it. The promoted message starts
-- its round then: due at the time of the change (or at its deliver_after),
-- with its timer due at once, so that the round's timers are worked out.
CREATE TRIGGER messages_key_release AFTER UPDATE ON messages
WHEN OLD.ordering_key IS NOT NULL AND OLD.order_skipped = 0
  AND (OLD.state IN ('inflight', 'suspended') OR (OLD.state = 'queued' AND OLD.next_attempt_at IS NOT NULL))
  AND NOT (NEW.route = OLD.route AND NEW.order_skipped = 0
       AND (NEW.state = 'inflight' OR (NEW.state = 'queued' AND NEW.next_attempt_at IS NOT NULL)
            OR (NEW.state = 'suspended' AND OLD.state = 'suspended')))
BEGIN
    UPDATE messages SET next_attempt_at = MAX(NEW.updated_at, COALESCE(deliver_after, 0)),
        round_started_at = NEW.updated_at, timer_at = NEW.updated_at, updated_at = NEW.updated_at
    WHERE seq = (SELECT w.seq FROM messages AS w INDEXED BY messages_key_waiting
            WHERE w.route = OLD.route AND w.ordering_key = OLD.ordering_key
              AND w.ordering_key IS NOT NULL AND w.order_skipped = 0 AND w.state = 'queued' AND w.next_attempt_at IS NULL
            ORDER BY w.seq LIMIT 1)
      AND NOT EXISTS (SELECT 1 FROM messages AS a INDEXED BY messages_key_active
            WHERE a.route = OLD.route AND a.ordering_key = OLD.ordering_key
              AND a.ordering_key IS NOT NULL AND a.order_skipped = 0
              AND (a.state = 'inflight' OR (a.state = 'queued' AND a.next_attempt_at IS NOT NULL)))
      AND NOT EXISTS (SELECT 1 FROM messages AS s INDEXED BY messages_key_suspended
            WHERE s.route = OLD.route AND s.ordering_key = OLD.ordering_key AND s.seq < messages.seq
              AND s.ordering_key IS NOT NULL AND s.order_skipped = 0 AND s.state = 'suspended');
END;
