-- The catalog of message types (GET /v1/types): each type taken in, with
-- how many messages of it came (a published message counts once) and when
-- the first and the last did. Ingest adds to it in the statement that
-- stores the messages. Each row of a type is a shard of its count, chosen
-- by the database session, so that ingests on several connections and
-- nodes do not wait for each other's lock of one row; a read sums them.
CREATE TABLE types (
    type       text        NOT NULL,
    shard      smallint    NOT NULL,
    count      bigint      NOT NULL,
    first_seen timestamptz NOT NULL,
    last_seen  timestamptz NOT NULL,
    PRIMARY KEY (type, shard)
);
INSERT INTO types (type, shard, count, first_seen, last_seen)
SELECT type, 0, count(*), min(created_at), max(created_at) FROM messages WHERE NOT shared GROUP BY type;
