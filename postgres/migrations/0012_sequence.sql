-- Courier-Sequence (docs/design.md §6, §8): the messages that join their ordering
-- key's order at ingest are numbered 1, 2, 3 … per route and key, in ingest
-- order. sequences keeps where each numbering stands: the last number given
-- and the id of its message, which the next one names as its previous. It
-- outlives the messages (a purge does not start a key's numbering over).
-- Ingest reads it and writes it back in the transaction that holds the
-- advisory lock of the key (courier_lock_keys), so that nodes ingesting
-- for one key number its messages one after another; the numbers are
-- worked out in Go.
CREATE TABLE sequences (
    route        text   NOT NULL,
    ordering_key text   NOT NULL,
    last         bigint NOT NULL,
    last_id      text   NOT NULL,
    PRIMARY KEY (route, ordering_key)
);

-- A message's number and the id of the one numbered before it; NULL for a
-- message without a number (no key, or ingested before this migration).
ALTER TABLE messages ADD COLUMN sequence bigint;
ALTER TABLE messages ADD COLUMN previous_id text;
