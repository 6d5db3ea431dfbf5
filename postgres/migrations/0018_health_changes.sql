-- The endpoints' health is read by change: each write stamps its row with
-- its transaction's id (xid), and a reader reads the rows stamped at or
-- after the oldest transaction still running at its last read (the xmin
-- of its snapshot then), so that it reads the rows written since instead
-- of the whole table every 100 ms, and misses no transaction that
-- committed after it read, whatever the order of their ids. A forgotten
-- health keeps its row, marked forgotten, so that readers learn of it.
ALTER TABLE endpoint_health ADD COLUMN xid xid8 NOT NULL DEFAULT pg_current_xact_id();
ALTER TABLE endpoint_health ADD COLUMN forgotten boolean NOT NULL DEFAULT false;
CREATE INDEX endpoint_health_xid ON endpoint_health (xid);
