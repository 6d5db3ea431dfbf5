-- The topology held in the store (docs/design.md §15): endpoints, routes, policies
-- and subscriptions by kind and name, each with its spec as the file has
-- it, in JSON (kept as text, so that it reads back byte for byte). Every
-- write makes the next version of the topology and stamps the objects it
-- wrote with it, so that a node reads only what changed since the version
-- it has. A deleted object stays as a tombstone (spec NULL), so that every
-- node learns of the delete.
CREATE TABLE topology_objects (
    kind       text        NOT NULL,
    name       text        NOT NULL,
    spec       text,                  -- JSON; NULL: deleted
    version    bigint      NOT NULL,  -- the topology version that last wrote it
    updated_at timestamptz NOT NULL,
    updated_by text        NOT NULL,
    PRIMARY KEY (kind, name)
);
CREATE INDEX topology_objects_version ON topology_objects (version);

-- The topology's current version, one row. A write moves it from the
-- version it was decided on to the next in its transaction, or finds it
-- moved and writes nothing: the row's lock makes writers of every node
-- take turns, so versions commit in order, each with its objects.
CREATE TABLE topology_version (version bigint NOT NULL);
INSERT INTO topology_version (version) VALUES (0);

-- The audit log: actions records topology changes besides operator
-- actions. object is the kind of object changed ('' for an operator
-- action), before and after its spec around the change (secrets shown as
-- "set"; NULL when it did not exist), version the topology version the
-- change made.
ALTER TABLE actions
    ADD COLUMN object text NOT NULL DEFAULT '',
    ADD COLUMN before text,
    ADD COLUMN after text,
    ADD COLUMN version bigint NOT NULL DEFAULT 0;
