-- Publish and subscribe (docs/design.md §14): a published message is stored as one
-- row per subscription that wants it, its delivery, with the message's id.
-- A row is identified by (id, subscription); subscription is '' for a
-- message sent to a route by name. The payload is kept once, in bodies
-- under the seq of the message's first row (its lead); the others are
-- marked shared and read it from there. Attempts and actions are kept under
-- the row's key: the id, or the id, '/' and the subscription.
--
-- The id was UNIQUE in the table's definition, which SQLite can only drop
-- by making the table anew: the rows are copied with their seqs, so bodies,
-- cursors and the order of ordering keys stay as they were.
CREATE TABLE messages_new (
    seq             INTEGER PRIMARY KEY,          -- ingest order: cursors and ordering keys
    id              TEXT    NOT NULL,
    subscription    TEXT    NOT NULL DEFAULT '',  -- '' for a message sent to a route by name
    shared          INTEGER NOT NULL DEFAULT 0,   -- 1: the payload is the lead's (same id, shared = 0)
    type            TEXT    NOT NULL,
    route           TEXT    NOT NULL,
    size            INTEGER NOT NULL,             -- payload bytes
    content_type    TEXT    NOT NULL,
    headers         TEXT,                         -- JSON object
    ordering_key    TEXT,
    priority        INTEGER NOT NULL DEFAULT 0,
    deliver_after   INTEGER,
    expires_at      INTEGER,
    hash            TEXT    NOT NULL,             -- the sender's content, for idempotent ingest
    state           TEXT    NOT NULL,
    reason          TEXT,
    attempts        INTEGER NOT NULL DEFAULT 0,   -- in the current round
    total_attempts  INTEGER NOT NULL DEFAULT 0,   -- every attempt: numbers the attempt rows, tokens leases
    abandoned       INTEGER NOT NULL DEFAULT 0,   -- attempts in a row whose worker vanished
    resubmit_count  INTEGER NOT NULL DEFAULT 0,
    round_started_at INTEGER NOT NULL,            -- max_age counts from here
    escalated       INTEGER NOT NULL DEFAULT 0,   -- escalations already sent
    fallback_from   TEXT,                         -- the route it fell back from
    next_attempt_at INTEGER,
    lease_until     INTEGER,
    lease_owner     TEXT,
    endpoint        TEXT,
    last_error      TEXT,
    last_class      TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    finished_at     INTEGER,
    timer_at        INTEGER,                      -- next escalation, fallback or expiry; NULL: none
    sender          TEXT,
    order_skipped   INTEGER NOT NULL DEFAULT 0,
    workflow        TEXT,
    step            INTEGER NOT NULL DEFAULT 0,
    failed_step     INTEGER NOT NULL DEFAULT 0,
    step_responses  TEXT,
    recipient       TEXT
);

INSERT INTO messages_new (seq, id, type, route, size, content_type, headers, ordering_key, priority,
    deliver_after, expires_at, hash, state, reason, attempts, total_attempts, abandoned, resubmit_count,
    round_started_at, escalated, fallback_from, next_attempt_at, lease_until, lease_owner, endpoint,
    last_error, last_class, created_at, updated_at, finished_at, timer_at, sender, order_skipped,
    workflow, step, failed_step, step_responses, recipient)
SELECT seq, id, type, route, size, content_type, headers, ordering_key, priority,
    deliver_after, expires_at, hash, state, reason, attempts, total_attempts, abandoned, resubmit_count,
    round_started_at, escalated, fallback_from, next_attempt_at, lease_until, lease_owner, endpoint,
    last_error, last_class, created_at, updated_at, finished_at, timer_at, sender, order_skipped,
    workflow, step, failed_step, step_responses, recipient
FROM messages;

DROP TABLE messages;
ALTER TABLE messages_new RENAME TO messages;

-- A message's rows, by id and subscription. The store's one writer checks
-- for an id before it stores a message under it, so that an id is either
-- a message sent to a route or a published one, never both.
CREATE UNIQUE INDEX messages_id ON messages (id, subscription);
-- Lists by subscription, newest first.
CREATE INDEX messages_subscription ON messages (subscription, seq) WHERE subscription <> '';

-- The indexes of the table as it was (migrations 0001 to 0003).
CREATE INDEX messages_leases ON messages (lease_until) WHERE state = 'inflight';
CREATE INDEX messages_timer ON messages (timer_at) WHERE timer_at IS NOT NULL;
CREATE INDEX messages_suspended ON messages (seq) WHERE state = 'suspended';
CREATE INDEX messages_finished ON messages (finished_at) WHERE state IN ('delivered', 'discarded');
CREATE INDEX messages_suspended_sender ON messages (sender) WHERE state = 'suspended' AND sender IS NOT NULL;
CREATE INDEX messages_queued ON messages (route, priority, next_attempt_at)
    WHERE state = 'queued' AND next_attempt_at IS NOT NULL;
CREATE INDEX messages_key_active ON messages (route, ordering_key)
    WHERE ordering_key IS NOT NULL AND order_skipped = 0
      AND (state = 'inflight' OR (state = 'queued' AND next_attempt_at IS NOT NULL));
CREATE INDEX messages_key_suspended ON messages (route, ordering_key, seq)
    WHERE ordering_key IS NOT NULL AND order_skipped = 0 AND state = 'suspended';
CREATE INDEX messages_key_waiting ON messages (route, ordering_key, seq)
    WHERE ordering_key IS NOT NULL AND order_skipped = 0 AND state = 'queued' AND next_attempt_at IS NULL;
