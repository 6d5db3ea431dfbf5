-- Each tenant's use of what its quotas bound (docs/design.md §20): its
-- messages not yet finished (queued, inflight, suspended; each row, a
-- delivery of a published message too) and the bytes of their payloads.
-- A tenant's messages are the ids that begin with its name and '~'; the
-- default tenant's are those without '~'. Every statement that makes a
-- row live or finished (ingest, a replayed delivery, applySQL and
-- deliveredSQL, which every outcome, operator action and bulk operation
-- goes through) adds what it changed in the same statement (countUsage in
-- postgres/usage.go); a purge deletes finished rows only. The counts are
-- kept in 16 shards per tenant, one per backend (its pid), as the types
-- of migration 0010 are, so that writers on other connections do not
-- queue on one row; a reader sums the shards.
CREATE TABLE tenant_usage (
	tenant text NOT NULL,
	shard integer NOT NULL,
	queued bigint NOT NULL DEFAULT 0,
	bytes bigint NOT NULL DEFAULT 0,
	PRIMARY KEY (tenant, shard)
);

INSERT INTO tenant_usage (tenant, shard, queued, bytes)
SELECT CASE WHEN strpos(id, '~') > 0 THEN split_part(id, '~', 1) ELSE 'default' END, 0, count(*), sum(size)
FROM messages WHERE state IN ('queued', 'inflight', 'suspended') GROUP BY 1;

-- Each tenant's ingest bucket (Quotas.IngestRate and Burst), for every
-- node: the tokens left at the time at (none: a full bucket). A taker
-- reads it under the row's lock and writes what courier.TakeTokens
-- decided before the lock is given back.
CREATE TABLE tenant_tokens (
	tenant text PRIMARY KEY,
	tokens double precision,
	at timestamptz
);
