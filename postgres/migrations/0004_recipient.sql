-- Recipient lookup (docs/design.md §13). A message on a route with a lookup names
-- its recipient, whose endpoint is resolved from a registry at delivery.
--
-- recipient: who the message is for; NULL for messages without one.
ALTER TABLE messages ADD COLUMN recipient text;
