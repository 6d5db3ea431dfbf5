-- Each tenant's use of what its quotas bound (docs/design.md §20): its
-- messages not yet finished (queued, inflight, suspended; each row, a
-- delivery of a published message too) and the bytes of their payloads.
-- A tenant's messages are the ids that begin with its name and '~'; the
-- default tenant's are those without '~'. Every write that makes a row
-- live or finished (an insert, applySQL, deliveredSQL) counts it in its
-- transaction, and the transaction adds what it counted, once per tenant,
-- before it commits (as the types of migration 0010); a purge deletes
-- finished rows only.
CREATE TABLE tenant_usage (
	tenant TEXT PRIMARY KEY,
	queued INTEGER NOT NULL DEFAULT 0,
	bytes  INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

INSERT INTO tenant_usage (tenant, queued, bytes)
SELECT CASE WHEN instr(id, '~') > 0 THEN substr(id, 1, instr(id, '~') - 1) ELSE 'default' END,
	COUNT(*), SUM(size)
FROM messages WHERE state IN ('queued', 'inflight', 'suspended') GROUP BY 1;
