package sqlite

import (
	"context"
	"database/sql"
	"strings"

	courier "github.com/courier-gw/courier"
)

// SetTenantQuotas keeps the caps that Ingest checks.
func (s *Store) SetTenantQuotas(quotas map[string]courier.Quotas) { s.quotas.Set(quotas) }

// countUsageSQL adds to each tenant of ?1, a JSON array of [tenant,
// messages, bytes], its messages and bytes (fewer, when negative), in
// its use (migration 0019).
const countUsageSQL = `INSERT INTO tenant_usage (tenant, queued, bytes)
	SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]') FROM json_each(?1) WHERE true
	ON CONFLICT (tenant) DO UPDATE SET queued = queued + excluded.queued, bytes = bytes + excluded.bytes`

// TenantUsage returns the tenants' use as migration 0019 keeps it.
func (s *Store) TenantUsage(ctx context.Context) ([]courier.TenantUsage, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT tenant, queued, bytes FROM tenant_usage
		WHERE queued <> 0 OR bytes <> 0 ORDER BY tenant`)
	return collectUsage(rows, err)
}

// tenantUsage reads the use of tenants in the writer's transaction: as
// stored, and what the transaction changed of it so far.
func (s *Store) tenantUsage(tx *sql.Tx, tenants []string) (map[string]courier.TenantUsage, error) {
	args := make([]any, len(tenants))
	for i, t := range tenants {
		args[i] = t
	}
	rows, err := tx.Query(`SELECT tenant, queued, bytes FROM tenant_usage WHERE tenant IN (?`+
		strings.Repeat(", ?", len(tenants)-1)+`)`, args...)
	use, err := collectUsage(rows, err)
	out := make(map[string]courier.TenantUsage, len(use))
	for _, u := range use {
		out[u.Tenant] = u
	}
	for _, t := range tenants {
		u, more := out[t], s.cur.usage.Of(t)
		u.Tenant, u.Queued, u.Bytes = t, u.Queued+more.Queued, u.Bytes+more.Bytes
		out[t] = u
	}
	return out, err
}

func collectUsage(rows *sql.Rows, err error) ([]courier.TenantUsage, error) {
	if err != nil {
		return nil, classify("read the tenants' use", err)
	}
	defer rows.Close()
	var out []courier.TenantUsage
	for rows.Next() {
		var u courier.TenantUsage
		if err := rows.Scan(&u.Tenant, &u.Queued, &u.Bytes); err != nil {
			return nil, classify("read the tenants' use", err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, classify("read the tenants' use", err)
	}
	return out, nil
}
