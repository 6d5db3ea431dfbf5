-- A message whose payload was erased on request before retention took it
-- (courier.Erasure, docs/design.md §2) keeps its row, with its bodies'
-- payload emptied and its blob reference cleared, and gains a tombstone:
-- when, by whom and why. Every delivery of a published message carries
-- it, as every one of them has lost the payload they share.
ALTER TABLE messages ADD COLUMN erased_at INTEGER;
ALTER TABLE messages ADD COLUMN erased_by TEXT;
ALTER TABLE messages ADD COLUMN erased_reason TEXT;
