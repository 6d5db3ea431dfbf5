package web

import (
	"testing"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
)

// A session acts in the tenant its cookie chose only if its key may see
// it; a tenant's key acts in its own whatever the cookie says.
func TestTenantOf(t *testing.T) {
	t.Parallel()
	views := func(names ...string) []api.TenantView {
		out := make([]api.TenantView, len(names))
		for i, n := range names {
			out[i] = api.TenantView{Name: n}
		}
		return out
	}
	all := views("acme", "beta", courier.DefaultTenant)
	for _, tc := range []struct {
		name    string
		visible []api.TenantView
		chosen  string
		want    string
	}{
		{"system, none chosen", all, "", courier.DefaultTenant},
		{"system chooses acme", all, "acme", "acme"},
		{"system chooses the default", all, courier.DefaultTenant, courier.DefaultTenant},
		{"system chooses one it may not see", all, "globex", courier.DefaultTenant},
		{"system chooses by a prefix", all, "ac", courier.DefaultTenant},
		{"a tenant's key, none chosen", views("beta"), "", "beta"},
		{"a tenant's key, another chosen", views("beta"), "acme", "beta"},
		{"a default tenant's key", views(courier.DefaultTenant), "acme", courier.DefaultTenant},
	} {
		if got := tenantOf(tc.visible, tc.chosen); got != tc.want {
			t.Errorf("%s: tenantOf(%q) = %q, want %q", tc.name, tc.chosen, got, tc.want)
		}
	}
}
