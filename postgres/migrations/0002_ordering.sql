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
--
-- Nodes change a group one at a time under a transaction-scoped advisory
-- lock on the key. Writers that touch several keys take their locks first,
-- in key order (courier_lock_keys), so that two of them never deadlock.

-- The message was suspended under ordered_on_failure: skip, or expired
-- while it waited; it no longer waits for its key nor blocks it, and a
-- resubmit to the same route delivers it on its own.
ALTER TABLE messages ADD COLUMN order_skipped boolean NOT NULL DEFAULT false;

-- Due work is claimed from messages_queued: a waiting message has no place
-- in it (it is in messages_key_waiting), which also keeps a query for the
-- waiting messages of a key from ever reading a route's due ones.
DROP INDEX messages_queued;
CREATE INDEX messages_queued ON messages (route, priority, next_attempt_at)
    WHERE state = 'queued' AND next_attempt_at IS NOT NULL;

CREATE INDEX messages_key_active ON messages (route, ordering_key)
    WHERE ordering_key IS NOT NULL AND NOT order_skipped
      AND (state = 'inflight' OR (state = 'queued' AND next_attempt_at IS NOT NULL));
CREATE INDEX messages_key_suspended ON messages (route, ordering_key, seq)
    WHERE ordering_key IS NOT NULL AND NOT order_skipped AND state = 'suspended';
CREATE INDEX messages_key_waiting ON messages (route, ordering_key, seq)
    WHERE ordering_key IS NOT NULL AND NOT order_skipped AND state = 'queued' AND next_attempt_at IS NULL;

CREATE FUNCTION courier_lock_keys(keys text[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    h integer;
BEGIN
    FOR h IN SELECT DISTINCT hashtext(k) FROM unnest(keys) AS k WHERE k IS NOT NULL ORDER BY 1 LOOP
        PERFORM pg_advisory_xact_lock(1668248441, h);
    END LOOP;
END
$$;

-- A message joins its group when it is ingested queued, comes back to it
-- (resubmitted) or comes into another one (resubmitted to another route,
-- or fallen back): it waits when an older member exists or one is active.
-- The function is volatile, so that its queries see the rows an outer
-- statement changed before this one (several messages of a key ingested
-- in one statement).
CREATE FUNCTION courier_key_join() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(1668248441, hashtext(NEW.ordering_key));
    IF EXISTS (SELECT 1 FROM messages
            WHERE route = NEW.route AND ordering_key = NEW.ordering_key AND seq <> NEW.seq
              AND ordering_key IS NOT NULL AND NOT order_skipped
              AND (state = 'inflight' OR (state = 'queued' AND next_attempt_at IS NOT NULL)))
        OR EXISTS (SELECT 1 FROM messages
            WHERE route = NEW.route AND ordering_key = NEW.ordering_key AND seq < NEW.seq
              AND ordering_key IS NOT NULL AND NOT order_skipped AND state = 'suspended')
        OR EXISTS (SELECT 1 FROM messages
            WHERE route = NEW.route AND ordering_key = NEW.ordering_key AND seq < NEW.seq
              AND ordering_key IS NOT NULL AND NOT order_skipped AND state = 'queued' AND next_attempt_at IS NULL) THEN
        NEW.next_attempt_at := NULL;
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER messages_key_join BEFORE INSERT ON messages FOR EACH ROW
    WHEN (NEW.ordering_key IS NOT NULL AND NOT NEW.order_skipped AND NEW.state = 'queued')
    EXECUTE FUNCTION courier_key_join();
CREATE TRIGGER messages_key_rejoin BEFORE UPDATE OF state, route ON messages FOR EACH ROW
    WHEN (NEW.ordering_key IS NOT NULL AND NOT NEW.order_skipped
      AND NEW.state = 'queued' AND NEW.next_attempt_at IS NOT NULL
      AND (OLD.state = 'suspended' OR NEW.route <> OLD.route))
    EXECUTE FUNCTION courier_key_join();

-- An active or suspended member that stops being one (delivered, discarded,
-- suspended, skipped, moved to another route, waiting after a resubmit)
-- lets the oldest waiting member of its group go, unless a member is
-- active or a suspended one is older than it. The promoted message starts
-- its round then: due at the time of the change (or at its deliver_after),
-- with its timer due at once, so that the round's timers are worked out.
CREATE FUNCTION courier_key_release() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(1668248441, hashtext(OLD.ordering_key));
    IF EXISTS (SELECT 1 FROM messages
            WHERE route = OLD.route AND ordering_key = OLD.ordering_key
              AND ordering_key IS NOT NULL AND NOT order_skipped
              AND (state = 'inflight' OR (state = 'queued' AND next_attempt_at IS NOT NULL))) THEN
        RETURN NULL;
    END IF;
    UPDATE messages m SET next_attempt_at = GREATEST(NEW.updated_at, m.deliver_after),
        round_started_at = NEW.updated_at, timer_at = NEW.updated_at, updated_at = NEW.updated_at
    WHERE m.seq = (SELECT seq FROM messages
            WHERE route = OLD.route AND ordering_key = OLD.ordering_key
              AND ordering_key IS NOT NULL AND NOT order_skipped AND state = 'queued' AND next_attempt_at IS NULL
            ORDER BY seq LIMIT 1)
      AND NOT EXISTS (SELECT 1 FROM messages s
            WHERE s.route = OLD.route AND s.ordering_key = OLD.ordering_key AND s.seq < m.seq
              AND s.ordering_key IS NOT NULL AND NOT s.order_skipped AND s.state = 'suspended');
    RETURN NULL;
END
$$;

CREATE TRIGGER messages_key_release AFTER UPDATE ON messages FOR EACH ROW
    WHEN (OLD.ordering_key IS NOT NULL AND NOT OLD.order_skipped
      AND (OLD.state IN ('inflight', 'suspended') OR (OLD.state = 'queued' AND OLD.next_attempt_at IS NOT NULL))
      AND NOT (NEW.route = OLD.route AND NOT NEW.order_skipped
           AND (NEW.state = 'inflight' OR (NEW.state = 'queued' AND NEW.next_attempt_at IS NOT NULL)
                OR (NEW.state = 'suspended' AND OLD.state = 'suspended'))))
    EXECUTE FUNCTION courier_key_release();
