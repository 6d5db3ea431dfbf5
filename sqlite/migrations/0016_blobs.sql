-- Payloads larger than courier.InlineMax are kept as files beside the
-- database (blobs): a message's row names its blob and the SHA-256 of its
-- payload, and bodies holds an empty payload for it. Every delivery of a
-- published message names the blob, so that it stays while one is left.
ALTER TABLE messages ADD COLUMN blob TEXT;
ALTER TABLE messages ADD COLUMN digest TEXT;
CREATE INDEX messages_blob ON messages (blob) WHERE blob IS NOT NULL;

-- Values courier keeps for itself, such as the key that signs the URLs
-- of claim checks: made once, shared by every node of the store.
CREATE TABLE settings (
	name  TEXT PRIMARY KEY,
	value BLOB NOT NULL
) WITHOUT ROWID;
