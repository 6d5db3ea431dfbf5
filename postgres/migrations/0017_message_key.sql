-- One unique index where migration 0009 made two: a message's lead (the
-- row that is not shared, which keeps the payload) is (id, '') in it, and
-- each shared delivery (id, subscription). So an id still has at most one
-- lead, a published message and one sent to a route still never share an
-- id, and a subscription still has at most one shared delivery of an id
-- (a lead's own subscription gets none: a replay finds the lead and
-- delivers it again). Reads by id and subscription use it by its id. Every
-- update of a message that PostgreSQL cannot make in place adds an entry
-- to each index of the table, and a delivery makes two such updates (the
-- lease and the outcome): one index less is two entries less per
-- delivery. The expression is leadKey in postgres/messages.go; the
-- conflict targets of ingest and replay name it.
CREATE UNIQUE INDEX messages_key ON messages (id, (CASE WHEN shared THEN subscription ELSE '' END));
DROP INDEX messages_lead;
DROP INDEX messages_id;
