package courier_test

import (
	"testing"

	courier "github.com/courier-gw/courier"
)

// A tenant's live counts are its routes'; AllTenants sums every route's.
func TestLiveByTenant(t *testing.T) {
	got := courier.LiveByTenant([]courier.RouteLive{
		{Route: "orders", LiveCounts: courier.LiveCounts{Queued: 1, Suspended: 2}},
		{Route: "acme/orders", LiveCounts: courier.LiveCounts{Queued: 3, Inflight: 1}},
		{Route: "acme/ledger", LiveCounts: courier.LiveCounts{Queued: 4}},
	})
	want := map[string]courier.LiveCounts{
		courier.AllTenants:    {Queued: 8, Inflight: 1, Suspended: 2},
		courier.DefaultTenant: {Queued: 1, Suspended: 2},
		"acme":                {Queued: 7, Inflight: 1},
	}
	if len(got) != len(want) {
		t.Errorf("LiveByTenant = %+v, want %+v", got, want)
	}
	for tenant, w := range want {
		if got[tenant] != w {
			t.Errorf("LiveByTenant[%q] = %+v, want %+v", tenant, got[tenant], w)
		}
	}
}

// A refusal by a tenant's quota names the quota; other errors name none.
func TestRefusedBy(t *testing.T) {
	q := courier.Quotas{MaxQueued: 1, MaxBytes: 10}
	for _, tt := range []struct {
		err  error
		want string
	}{
		{courier.CheckQuotas("acme", q, courier.TenantUsage{Queued: 2}, 1, 1), courier.QuotaMaxQueued},
		{courier.CheckQuotas("acme", q, courier.TenantUsage{Queued: 1, Bytes: 11}, 1, 11), courier.QuotaMaxBytes},
		{courier.Errorf(courier.CodeQuotaExceeded, "not by a quota"), ""},
		{nil, ""},
	} {
		if got := courier.RefusedBy(tt.err); got != tt.want {
			t.Errorf("RefusedBy(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
