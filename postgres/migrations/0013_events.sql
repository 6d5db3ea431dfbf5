-- Operational events (endpoint suspended, off, recovered; route lagging;
-- receive location stopped), listed at GET /v1/events and on the
-- dashboard. id is derived from the transition, so that the nodes that see
-- one record it once; notified says whether its notices went out (the rate
-- limit, decided in Go, may hold them back); details is JSON.
CREATE TABLE events (
    seq      bigserial   PRIMARY KEY,
    id       text        NOT NULL UNIQUE,
    kind     text        NOT NULL,
    subject  text        NOT NULL,
    at       timestamptz NOT NULL,
    details  text        NOT NULL,
    notified boolean     NOT NULL
);
CREATE INDEX events_subject ON events (subject, at);
CREATE INDEX events_kind ON events (kind, seq);
