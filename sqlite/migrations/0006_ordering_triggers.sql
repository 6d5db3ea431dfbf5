-- The ordering triggers of migration 0003 fired on every update of a
-- message, SQLite running each one's program for every row even when its
-- WHEN clause turned it down: about a fifth of the CPU of writing an
-- outcome. They now fire only for statements that name ordering_key in
-- their SET list, which a key never changes (ordering_key = ordering_key).
-- Every statement that may move a message with a key out of or into its
-- place in the order names it: the operators' transitions, the route
-- suspensions, the outcomes of such messages and the triggers' own updates
-- (so that each fires what it fired before). Two statements leave it out,
-- for which the triggers never did anything: the lease of a claim, which
-- takes an active message and keeps it active, and the outcome of a message
-- without a key.
DROP TRIGGER messages_key_join;
DROP TRIGGER messages_key_rejoin;
DROP TRIGGER messages_key_release;

CREATE TRIGGER messages_key_join AFTER INSERT ON messages
WHEN NEW.ordering_key IS NOT NULL AND NEW.order_skipped = 0 AND NEW.state = 'queued'
BEGIN
    UPDATE messages SET next_attempt_at = NULL, ordering_key = ordering_key
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

CREATE TRIGGER messages_key_rejoin AFTER UPDATE OF ordering_key ON messages
WHEN NEW.ordering_key IS NOT NULL AND NEW.order_skipped = 0
  AND NEW.state = 'queued' AND NEW.next_attempt_at IS NOT NULL
  AND (OLD.state = 'suspended' OR NEW.route <> OLD.route)
BEGIN
    UPDATE messages SET next_attempt_at = NULL, ordering_key = ordering_key
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

CREATE TRIGGER messages_key_release AFTER UPDATE OF ordering_key ON messages
WHEN OLD.ordering_key IS NOT NULL AND OLD.order_skipped = 0
  AND (OLD.state IN ('inflight', 'suspended') OR (OLD.state = 'queued' AND OLD.next_attempt_at IS NOT NULL))
  AND NOT (NEW.route = OLD.route AND NEW.order_skipped = 0
       AND (NEW.state = 'inflight' OR (NEW.state = 'queued' AND NEW.next_attempt_at IS NOT NULL)
            OR (NEW.state = 'suspended' AND OLD.state = 'suspended')))
BEGIN
    UPDATE messages SET next_attempt_at = MAX(NEW.updated_at, COALESCE(deliver_after, 0)),
        round_started_at = NEW.updated_at, timer_at = NEW.updated_at, updated_at = NEW.updated_at,
        ordering_key = ordering_key
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
