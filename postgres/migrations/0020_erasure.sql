-- A message whose payload was erased on request before retention took it
-- (courier.Erasure, docs/design.md §2) keeps its row, with its bodies'
-- payload emptied and its blob reference cleared (a large object of it is
-- unlinked in the same transaction), and gains a tombstone: when, by whom
-- and why. Every delivery of a published message carries it, as every one
-- of them has lost the payload they share.
ALTER TABLE messages ADD COLUMN erased_at timestamptz;
ALTER TABLE messages ADD COLUMN erased_by text;
ALTER TABLE messages ADD COLUMN erased_reason text;
