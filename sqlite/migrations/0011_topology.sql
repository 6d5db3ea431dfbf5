-- The topology held in the store (docs/design.md §15): endpoints, routes, policies
-- and subscriptions by kind and name, each with its spec as the file has
-- it, in JSON. Every write makes the next version of the topology and
-- stamps the objects it wrote with it, so that a node reads only what
-- changed since the version it has. A deleted object stays as a tombstone
-- (spec NULL), so that every node learns of the delete.
CREATE TABLE topology_objects (
    kind       TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    spec       TEXT,                -- JSON; NULL: deleted
    version    INTEGER NOT NULL,    -- the topology version that last wrote it
    updated_at INTEGER NOT NULL,
    updated_by TEXT    NOT NULL,
    PRIMARY KEY (kind, name)
) WITHOUT ROWID;
CREATE INDEX topology_objects_version ON topology_objects (version);

-- The topology's current version, one row: a write moves it from the
-- version it was decided on to the next, or finds it moved and writes
-- nothing.
CREATE TABLE topology_version (version INTEGER NOT NULL);
INSERT INTO topology_version (version) VALUES (0);

-- The audit log: actions records topology changes besides operator
-- actions. object is the kind of object changed ('' for an operator
-- action), before and after its spec around the change (secrets shown as
-- "set"; NULL when it did not exist), version the topology version the
-- change made.
ALTER TABLE actions ADD COLUMN object TEXT NOT NULL DEFAULT '';
ALTER TABLE actions ADD COLUMN before TEXT;
ALTER TABLE actions ADD COLUMN after TEXT;
ALTER TABLE actions ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
