-- A node's share of an endpoint's max_concurrency is one row with a count,
-- not a row per slot: taking sixteen slots, giving them back and renewing
-- them write one row each instead of sixteen. Nodes take slots one at a
-- time per endpoint, under the endpoint's transaction-scoped advisory lock,
-- so the counts of live rows never add up past the limit. Slots of the
-- previous release's rows are only leases: dropping them loses nothing but
-- the attempts' turns, which the nodes take again.
DROP TABLE IF EXISTS endpoint_slots;
CREATE TABLE endpoint_holds (
    endpoint text        NOT NULL,
    owner    text        NOT NULL,
    n        integer     NOT NULL,
    until    timestamptz NOT NULL,
    PRIMARY KEY (endpoint, owner)
);
CREATE INDEX endpoint_holds_owner ON endpoint_holds (owner);
