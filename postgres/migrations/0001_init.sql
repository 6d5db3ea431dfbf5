-- courier's schema on PostgreSQL. Times are timestamptz; NULL is "not set".

CREATE TABLE messages (
    seq              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, -- ingest order: cursors and ordering keys
    id               text        NOT NULL UNIQUE,
    type             text        NOT NULL,
    route            text        NOT NULL,
    size             integer     NOT NULL,          -- payload bytes
    content_type     text        NOT NULL,
    headers          jsonb,
    ordering_key     text,
    priority         smallint    NOT NULL DEFAULT 0,
    deliver_after    timestamptz,
    expires_at       timestamptz,
    hash             text        NOT NULL,          -- the sender's content, for idempotent ingest
    state            text        NOT NULL,
    reason           text,
    attempts         integer     NOT NULL DEFAULT 0, -- in the current round
    total_attempts   integer     NOT NULL DEFAULT 0, -- every attempt: numbers the attempt rows, tokens leases
    abandoned        integer     NOT NULL DEFAULT 0, -- attempts in a row whose worker vanished
    resubmit_count   integer     NOT NULL DEFAULT 0,
    round_started_at timestamptz NOT NULL,           -- max_age counts from here
    escalated        integer     NOT NULL DEFAULT 0,
    fallback_from    text,
    next_attempt_at  timestamptz,
    lease_until      timestamptz,
    lease_owner      text,
    endpoint         text,
    last_error       text,
    last_class       text,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    finished_at      timestamptz,
    timer_at         timestamptz,                    -- next escalation, fallback or expiry
    sender           text                            -- the API key that ingested it; NULL: none
);

-- Due work per route and priority, oldest due first: a claim reads one range
-- of this index per priority, holding only due messages, so neither future
-- retries nor the backlog of a held route is scanned.
CREATE INDEX messages_queued ON messages (route, priority, next_attempt_at) WHERE state = 'queued';
-- Lapsed leases, for the rescuer.
CREATE INDEX messages_leases ON messages (lease_until) WHERE state = 'inflight';
-- Escalations, fallbacks and expiries, which fire even while a route is held.
CREATE INDEX messages_timer ON messages (timer_at) WHERE timer_at IS NOT NULL;
-- The suspended queue, newest first.
CREATE INDEX messages_suspended ON messages (seq) WHERE state = 'suspended';
-- Suspended messages per sender, for the cap checked at ingest.
CREATE INDEX messages_suspended_sender ON messages (sender) WHERE state = 'suspended' AND sender IS NOT NULL;
-- Retention: only terminal messages are in it.
CREATE INDEX messages_finished ON messages (finished_at) WHERE state IN ('delivered', 'discarded');

-- Payloads apart from their messages: every claim and outcome writes a new
-- version of the message row, and the payload never changes.
CREATE TABLE bodies (
    seq     bigint PRIMARY KEY,
    payload bytea  NOT NULL
);

CREATE TABLE attempts (
    message_id  text        NOT NULL,
    n           integer     NOT NULL,
    endpoint    text        NOT NULL,
    route       text        NOT NULL,
    started_at  timestamptz NOT NULL,
    duration_us bigint      NOT NULL,
    outcome     text        NOT NULL,
    class       text,
    status      integer     NOT NULL DEFAULT 0,
    error       text,
    response    text,
    PRIMARY KEY (message_id, n)
);

CREATE TABLE endpoint_health (
    endpoint        text PRIMARY KEY,
    state           text        NOT NULL,
    failures        integer     NOT NULL DEFAULT 0,
    suspensions     integer     NOT NULL DEFAULT 0,
    suspended_until timestamptz,
    probe_until     timestamptz,
    updated_at      timestamptz NOT NULL
);

CREATE TABLE actions (
    seq     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at      timestamptz NOT NULL,
    who     text        NOT NULL,
    kind    text        NOT NULL,
    subject text        NOT NULL,
    detail  text
);
CREATE INDEX actions_subject ON actions (subject, seq);

-- Bulk resubmits and discards, resumed after a restart by any node; messages
-- are taken in seq order up to max_seq, the newest when the operation began.
CREATE TABLE bulk_ops (
    id         text PRIMARY KEY,
    kind       text        NOT NULL,
    filter     jsonb       NOT NULL,
    route      text,
    who        text        NOT NULL,
    max_seq    bigint      NOT NULL,
    cursor     bigint      NOT NULL DEFAULT 0,
    count      integer     NOT NULL DEFAULT 0,
    done       boolean     NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

-- Politeness across nodes. A node holds slots of an endpoint's
-- max_concurrency while it has attempts for it; a slot whose holder stopped
-- renewing it (the node died) is free again after until.
CREATE TABLE endpoint_slots (
    endpoint text        NOT NULL,
    slot     integer     NOT NULL,
    owner    text,
    until    timestamptz,
    PRIMARY KEY (endpoint, slot)
);
-- The booked start of the next attempt of a paced endpoint (min_interval, rate).
CREATE TABLE endpoint_pace (
    endpoint text PRIMARY KEY,
    next_at  timestamptz NOT NULL
);
