-- The priorities that messages have been stored with. A claim reads one
-- range of messages_queued per route and priority; reading only the
-- priorities in use saves a deployment that uses one or two of them eight
-- or nine index descents per route and claim. A row is added in the
-- statement that stores the first message of its priority, so a claim
-- that sees a message sees its priority; rows are never removed.
CREATE TABLE priorities (priority smallint PRIMARY KEY);
INSERT INTO priorities (priority) SELECT DISTINCT priority FROM messages ON CONFLICT DO NOTHING;
