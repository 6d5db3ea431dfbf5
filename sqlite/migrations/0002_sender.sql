-- The API key that ingested a message (NULL: none), so that a sender key
-- reads only its own messages and its suspended messages can be capped.
ALTER TABLE messages ADD COLUMN sender TEXT;
-- Suspended messages per sender, for the cap checked at ingest.
CREATE INDEX messages_suspended_sender ON messages (sender) WHERE state = 'suspended' AND sender IS NOT NULL;
