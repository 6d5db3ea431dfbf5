-- Publish and subscribe (docs/design.md §14). A published message is stored as one
-- row per subscription that wants it, its delivery, all with the message's
-- id; a row is identified by (id, subscription), and subscription is ''
-- for a message sent to a route by name. The payload is kept once, in
-- bodies under the seq of the message's first row (its lead: the message
-- sent to a route, or the first delivery by subscription name); the other
-- deliveries are marked shared and read it from there. Attempts and
-- actions are kept under the row's key: the id, or the id, '/' and the
-- subscription.
--
-- subscription: the subscription of a delivery; '' for a message sent to a
--   route by name.
-- shared: the payload is the lead's (the row of the same id that is not
--   shared).
ALTER TABLE messages
    ADD COLUMN subscription text NOT NULL DEFAULT '',
    ADD COLUMN shared boolean NOT NULL DEFAULT false;

-- A message's rows, by id and subscription, in place of the id's UNIQUE
-- constraint of migration 0001.
ALTER TABLE messages DROP CONSTRAINT messages_id_key;
CREATE UNIQUE INDEX messages_id ON messages (id, subscription);
-- At most one lead per id: an id is a message sent to a route or a
-- published one, never both, also when two nodes ingest it at once (the
-- second insert of a lead waits for the first and then conflicts with it).
-- It is the conflict target of the ingest statement.
CREATE UNIQUE INDEX messages_lead ON messages (id) WHERE NOT shared;
-- Lists by subscription, newest first.
CREATE INDEX messages_subscription ON messages (subscription, seq) WHERE subscription <> '';
