-- The order of keyed messages is decided in Go (courier.KeyGroup) and
-- written by the store's statements; the triggers of migrations 0003 and
-- 0006 that decided it go. The partial indexes of 0003 stay: the store
-- reads a key's group through them.
DROP TRIGGER IF EXISTS messages_key_join;
DROP TRIGGER IF EXISTS messages_key_rejoin;
DROP TRIGGER IF EXISTS messages_key_release;
