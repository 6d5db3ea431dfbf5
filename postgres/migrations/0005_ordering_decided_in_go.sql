-- The order of keyed messages is decided in Go (courier.KeyGroup) and
-- written by the store's statements, under the advisory locks of the keys
-- (courier_lock_keys, which only locks); the triggers and functions of
-- migration 0002 that decided it go. Its partial indexes stay: the store
-- reads a key's group through them.
DROP TRIGGER IF EXISTS messages_key_join ON messages;
DROP TRIGGER IF EXISTS messages_key_rejoin ON messages;
DROP TRIGGER IF EXISTS messages_key_release ON messages;
DROP FUNCTION IF EXISTS courier_key_join();
DROP FUNCTION IF EXISTS courier_key_release();
