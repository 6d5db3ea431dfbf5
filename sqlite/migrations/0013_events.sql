-- Operational events (endpoint suspended, off, recovered; route lagging;
-- receive location stopped), listed at GET /v1/events and on the
-- dashboard. id is derived from the transition, so that the nodes that see
-- one record it once; notified says whether its notices went out (the rate
-- limit, decided in Go, may hold them back); details is JSON.
CREATE TABLE events (
    seq      INTEGER PRIMARY KEY AUTOINCREMENT,
    id       TEXT    NOT NULL UNIQUE,
    kind     TEXT    NOT NULL,
    subject  TEXT    NOT NULL,
    at       INTEGER NOT NULL,
    details  TEXT    NOT NULL,
    notified INTEGER NOT NULL
);
CREATE INDEX events_subject ON events (subject, at);
CREATE INDEX events_kind ON events (kind, seq);
