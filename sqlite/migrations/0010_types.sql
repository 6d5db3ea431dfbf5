-- The catalog of message types (GET /v1/types): each type taken in, with
-- how many messages of it came (a published message counts once) and when
-- the first and the last did. Ingest keeps it, one row per type and
-- transaction, so that the catalog costs a read of this table, not of the
-- messages.
CREATE TABLE types (
    type       TEXT    PRIMARY KEY,
    count      INTEGER NOT NULL,
    first_seen INTEGER NOT NULL,
    last_seen  INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO types (type, count, first_seen, last_seen)
SELECT type, count(*), min(created_at), max(created_at) FROM messages WHERE shared = 0 GROUP BY type;
