-- Payloads larger than courier.InlineMax are kept apart from the rows
-- (blobs): in large objects, or as files in a directory the nodes share. A
-- message's row names its blob and the SHA-256 of its payload, and bodies
-- holds an empty payload for it. Every delivery of a published message
-- names the blob, so that it stays while one is left.
ALTER TABLE messages ADD COLUMN blob text;
ALTER TABLE messages ADD COLUMN digest text;
CREATE INDEX messages_blob ON messages (blob) WHERE blob IS NOT NULL;

-- The large objects courier made, so that a sweep looks at its own only;
-- size is set when the upload commits.
CREATE TABLE blob_objects (
	oid        oid PRIMARY KEY,
	size       bigint NOT NULL DEFAULT 0,
	created_at timestamptz NOT NULL DEFAULT now()
);

-- Values courier keeps for itself, such as the key that signs the URLs
-- of claim checks: made once, shared by every node of the store.
CREATE TABLE settings (
	name  text PRIMARY KEY,
	value bytea NOT NULL
);
