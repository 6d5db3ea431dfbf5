package postgres

import (
	"context"

	courier "github.com/courier-gw/courier"
	"github.com/jackc/pgx/v5"
)

// liveStates are the states of the messages a tenant's use counts.
const liveStates = `('queued', 'inflight', 'suspended')`

// countUsage is the CTE, named usage, that adds to the tenants' use
// (migration 0019) what a statement changed: the rows of its CTE
// usage_rows, those it made live (delta 1) or finished (delta -1), with
// their id and size. Every statement that moves a message between live
// and finished has it, so that the counts hold whichever way a message
// moves; a statement adds once per tenant (the tenant of an id as
// courier.TenantOfID says), in tenant order, so that two statements on
// connections of the same shard never wait on each other in turn.
const countUsage = `usage AS (
	INSERT INTO tenant_usage AS u (tenant, shard, queued, bytes)
	SELECT CASE WHEN strpos(c.id, '` + courier.IDMark + `') > 0 THEN split_part(c.id, '` + courier.IDMark + `', 1)
		ELSE '` + courier.DefaultTenant + `' END, pg_backend_pid() % 16, sum(c.delta), sum(c.delta * c.size::bigint)
	FROM usage_rows c WHERE c.delta <> 0 GROUP BY 1 ORDER BY 1
	ON CONFLICT (tenant, shard) DO UPDATE SET queued = u.queued + excluded.queued, bytes = u.bytes + excluded.bytes
)`

// tenantUsageSQL sums the shards of the tenants' use.
const tenantUsageSQL = `SELECT tenant, sum(queued)::bigint, sum(bytes)::bigint FROM tenant_usage`

// SetTenantQuotas keeps the caps that Ingest checks.
func (s *Store) SetTenantQuotas(quotas map[string]courier.Quotas) { s.quotas.Set(quotas) }

// TenantUsage returns the tenants' use: the sums of their shards.
func (s *Store) TenantUsage(ctx context.Context) ([]courier.TenantUsage, error) {
	rows, err := s.pool.Query(ctx, tenantUsageSQL+` GROUP BY tenant
		HAVING sum(queued) <> 0 OR sum(bytes) <> 0 ORDER BY tenant`)
	return collectUsage(rows, err)
}

// tenantUsage reads the use of tenants in an ingest's transaction.
func tenantUsage(ctx context.Context, tx pgx.Tx, tenants []string) (map[string]courier.TenantUsage, error) {
	rows, err := tx.Query(ctx, tenantUsageSQL+` WHERE tenant = ANY($1) GROUP BY tenant`, tenants)
	return usageByTenant(collectUsage(rows, err))
}

// usageByTenant maps the use read by tenant.
func usageByTenant(use []courier.TenantUsage, err error) (map[string]courier.TenantUsage, error) {
	out := make(map[string]courier.TenantUsage, len(use))
	for _, u := range use {
		out[u.Tenant] = u
	}
	return out, err
}

func collectUsage(rows pgx.Rows, err error) ([]courier.TenantUsage, error) {
	return collect(nil, rows, err, "read the tenants' use", func(row scanner) (courier.TenantUsage, error) {
		var u courier.TenantUsage
		err := row.Scan(&u.Tenant, &u.Queued, &u.Bytes)
		return u, err
	})
}
