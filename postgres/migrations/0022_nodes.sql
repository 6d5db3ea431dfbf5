-- The nodes that joined (courier.Presence): each holds a session-level
-- advisory lock of class 1852793701 on hashtext(schema || ' ' || owner) for
-- as long as it is there. A row whose lock nobody holds is a node that is
-- gone: the others take over its leases and slot holds at once, then
-- delete the row. Nodes of an earlier release never join, and are never
-- judged gone: their work is taken over when it lapses, as before.
CREATE TABLE nodes (
    owner     text        PRIMARY KEY,
    joined_at timestamptz NOT NULL DEFAULT now()
);
