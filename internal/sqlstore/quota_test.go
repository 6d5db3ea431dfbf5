package sqlstore

import (
	"fmt"
	"testing"

	courier "github.com/courier-gw/courier"
)

// A transaction's counts hold one row per tenant, in the order first
// counted, however many tenants' messages it touched and however they
// interleave; a reset forgets them.
func TestUsageCountsOneRowPerTenant(t *testing.T) {
	var c UsageCounts
	const tenants = 300
	for k := range 3 * tenants {
		tenant := fmt.Sprintf("t%03d", k%tenants)
		c.Add(courier.QualifyID(tenant, fmt.Sprintf("m-%d", k)), 10, "", courier.StateQueued)
	}
	c.Add(courier.QualifyID("t001", "m-1"), 10, courier.StateInflight, courier.StateDelivered)
	c.Add("plain", 7, "", courier.StateQueued)
	rows := c.Rows()
	if len(rows) != tenants+1 || rows[0].Tenant != "t000" || rows[tenants].Tenant != courier.DefaultTenant {
		t.Fatalf("%d rows, first %+v, last %+v; want %d, t000's first, the default tenant's last", len(rows), rows[0], rows[len(rows)-1], tenants+1)
	}
	for _, tc := range []struct {
		tenant       string
		queued, size int64
	}{{"t000", 3, 30}, {"t001", 2, 20}, {"t299", 3, 30}, {courier.DefaultTenant, 1, 7}, {"none", 0, 0}} {
		if got := c.Of(tc.tenant); got.Queued != tc.queued || got.Bytes != tc.size {
			t.Errorf("%s: %+v, want %d messages of %d bytes", tc.tenant, got, tc.queued, tc.size)
		}
	}
	c.Reset()
	if len(c.Rows()) != 0 || c.Of("t000").Queued != 0 {
		t.Errorf("after a reset: %d rows, t000 %+v; want none", len(c.Rows()), c.Of("t000"))
	}
}
