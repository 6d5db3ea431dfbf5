-- The priorities that messages have been stored with. A claim reads one
-- range of messages_queued per route and priority; reading only the
-- priorities in use saves a deployment that uses one or two of them eight
-- or nine index seeks per route and claim. Rows are only ever added.
CREATE TABLE priorities (priority INTEGER PRIMARY KEY);
INSERT OR IGNORE INTO priorities (priority) SELECT DISTINCT priority FROM messages;
