package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/courier-gw/courier/api"
	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"
)

func newTenantsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "tenants",
		Aliases: []string{"tenant"},
		Short:   "Tenants: their weights, quotas and use",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the tenants with their use against their quotas (a tenant's key sees its own)",
		Args:  cobra.NoArgs,
		RunE: askServer(g, func(ctx context.Context, c *api.Client, _ []string) (api.TenantList, error) {
			list, err := c.Tenants(ctx)
			if err != nil {
				return api.TenantList{}, err
			}
			return *list, nil
		}, func(list api.TenantList) error {
			return tableOf(g, []string{"NAME", "WEIGHT", "QUEUED", "BYTES", "ENDPOINTS", "INGEST RATE", "RETENTION"},
				list.Tenants, func(t api.TenantView) []string {
					return []string{t.Name, fmt.Sprint(t.Weight), ofQuota(t.Use.Queued, int64(t.Quotas.MaxQueued), count),
						ofQuota(t.Use.Bytes, t.Quotas.MaxBytes, func(n int64) string { return humanize.IBytes(uint64(n)) }),
						ofQuota(int64(t.Endpoints), int64(t.Quotas.MaxEndpoints), count), orDash(t.Quotas.IngestRate), orDash(t.Retention)}
				})
		}),
	})
	return cmd
}

// ofQuota shows a use and, when there is one, the quota it is held to.
func ofQuota(use, quota int64, show func(int64) string) string {
	if quota <= 0 {
		return show(use)
	}
	return show(use) + " of " + show(quota)
}

func count(n int64) string { return strconv.FormatInt(n, 10) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
