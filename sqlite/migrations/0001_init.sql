-- Times are unix microseconds (UTC); NULL is "not set".

CREATE TABLE messages (
    seq             INTEGER PRIMARY KEY,          -- ingest order: cursors and ordering keys
    id              TEXT    NOT NULL UNIQUE,
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
    timer_at        INTEGER                       -- next escalation, fallback or expiry; NULL: none
);

-- Partial indexes keep each index small and the per-ingest cost low: a new
-- message enters the table, the id index and the queued index (plus the timer
-- index when it has one).
-- Due work is claimed per route and priority, oldest due first: an index
-- range holds exactly the due messages, so neither future retries nor the
-- backlog of a held route is ever scanned.
CREATE INDEX messages_queued ON messages (route, priority, next_attempt_at) WHERE state = 'queued';
-- Lapsed leases, for the rescuer.
CREATE INDEX messages_leases ON messages (lease_until) WHERE state = 'inflight';
-- The next time-driven event of a message (escalation, fallback, expiry),
-- which must fire even while its route is held.
CREATE INDEX messages_timer ON messages (timer_at) WHERE timer_at IS NOT NULL;
-- The suspended queue, newest first.
CREATE INDEX messages_suspended ON messages (seq) WHERE state = 'suspended';
-- Retention: only terminal messages are in it.
CREATE INDEX messages_finished ON messages (finished_at) WHERE state IN ('delivered', 'discarded');

-- Payloads live apart from the messages they belong to (same seq): SQLite
-- rewrites a whole row on every update, and a message is updated at every
-- claim and outcome while its payload never changes.
CREATE TABLE bodies (
    seq     INTEGER PRIMARY KEY,
    payload BLOB NOT NULL
);

CREATE TABLE attempts (
    message_id  TEXT    NOT NULL,
    n           INTEGER NOT NULL,
    endpoint    TEXT    NOT NULL,
    route       TEXT    NOT NULL,
    started_at  INTEGER NOT NULL,
    duration_us INTEGER NOT NULL,
    outcome     TEXT    NOT NULL,
    class       TEXT,
    status      INTEGER NOT NULL DEFAULT 0,
    error       TEXT,
    response    TEXT,
    PRIMARY KEY (message_id, n)
) WITHOUT ROWID;

CREATE TABLE endpoint_health (
    endpoint        TEXT PRIMARY KEY,
    state           TEXT    NOT NULL,
    failures        INTEGER NOT NULL DEFAULT 0,
    suspensions     INTEGER NOT NULL DEFAULT 0,
    suspended_until INTEGER,
    probe_until     INTEGER,
    updated_at      INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE actions (
    seq     INTEGER PRIMARY KEY,
    at      INTEGER NOT NULL,
    who     TEXT    NOT NULL,
    kind    TEXT    NOT NULL,
    subject TEXT    NOT NULL,
    detail  TEXT
);
CREATE INDEX actions_subject ON actions (subject, seq);

-- Bulk resubmits and discards: durable, resumed after a restart. Messages
-- are taken in seq order up to max_seq (the newest when the operation began),
-- so that one made suspended again meanwhile is not taken twice.
CREATE TABLE bulk_ops (
    id          TEXT PRIMARY KEY,
    kind        TEXT    NOT NULL,
    filter      TEXT    NOT NULL,   -- JSON of the message filter
    route       TEXT,               -- resubmit to this route
    who         TEXT    NOT NULL,
    max_seq     INTEGER NOT NULL,
    cursor      INTEGER NOT NULL DEFAULT 0,
    count       INTEGER NOT NULL DEFAULT 0,
    done        INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
) WITHOUT ROWID;
