-- The endpoints' health is read by change: each write numbers its row
-- (version, above every number before; SQLite's one writer commits them
-- in that order), so that a node reads the rows written since its last
-- read instead of the whole table every 100 ms. A forgotten health keeps
-- its row, marked forgotten, so that readers learn of it.
ALTER TABLE endpoint_health ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE endpoint_health ADD COLUMN forgotten INTEGER NOT NULL DEFAULT 0;
UPDATE endpoint_health SET version = 1;
CREATE INDEX endpoint_health_version ON endpoint_health (version);
