package main

import (
	"context"
	"fmt"
	"strings"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/spf13/cobra"
)

func newStatsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "stats",
		Short: "Messages by state, and the deliveries and failures of this node",
		Long: `Messages by state (queued, inflight, suspended), as the server last counted
them in its store, and what the server answering has delivered and failed
since it started, over the last hour and per second over the last minutes.
On several nodes sharing a store, the states are the store's and the rest is
the node's. Every figure is of the tenant's messages alone (--tenant, or the
key's own tenant); those of the tenant system are the whole server's.`,
		Args: cobra.NoArgs,
		RunE: askServer(g, func(ctx context.Context, c *api.Client, _ []string) (*api.Stats, error) {
			return c.Stats(ctx)
		}, g.printStats),
	}
}

func (g *globals) printStats(st *api.Stats) error {
	var rows [][]string
	for _, s := range []courier.State{courier.StateQueued, courier.StateInflight, courier.StateSuspended} {
		rows = append(rows, []string{string(s), fmt.Sprint(st.States[s])})
	}
	if err := g.table([]string{"STATE", "MESSAGES"}, rows); err != nil {
		return err
	}
	counted := st.CountedAt
	fmt.Fprintf(g.stdout, "counted %s\n", until(&counted))
	if st.Node == nil {
		return nil
	}
	fmt.Fprintln(g.stdout)
	window, perSecond := "-", func(float64) string { return "-" }
	var delivered, failed float64
	if st.Rates != nil {
		window, delivered, failed = st.Rates.Window, st.Rates.Delivered, st.Rates.Failed
		perSecond = func(v float64) string { return fmt.Sprintf("%.2f", v) }
	}
	n := st.Node
	rows = [][]string{
		{"delivered", fmt.Sprint(n.Delivered), fmt.Sprint(st.LastHour.Delivered), perSecond(delivered)},
		{"failed attempts", "-", fmt.Sprint(st.LastHour.Failed), perSecond(failed)},
		{"ingested", fmt.Sprint(n.Ingested), "-", "-"},
		{"suspended", fmt.Sprint(n.Suspended), "-", "-"},
		{"discarded by policy", fmt.Sprint(n.Discarded), "-", "-"},
	}
	since := n.Since
	if err := g.table([]string{"THIS NODE", "SINCE START", "LAST HOUR", "PER SECOND (" + window + ")"}, rows); err != nil {
		return err
	}
	fmt.Fprintf(g.stdout, "started %s\n", until(&since))
	if len(st.Minutes) > 0 {
		fmt.Fprintf(g.stdout, "deliveries per minute, last hour: %s\n", sparkline(st.Minutes))
	}
	return nil
}

// sparkline draws the deliveries of each minute as a bar of eight heights;
// a minute with failures and no delivery is an x.
func sparkline(minutes []api.MinuteStats) string {
	bars := []rune("▁▂▃▄▅▆▇█")
	most := 0
	for _, m := range minutes {
		most = max(most, m.Delivered)
	}
	var b strings.Builder
	for _, m := range minutes {
		switch {
		case m.Delivered == 0 && m.Failed > 0:
			b.WriteRune('x')
		case m.Delivered == 0:
			b.WriteRune(' ')
		default:
			b.WriteRune(bars[(m.Delivered*(len(bars)-1)+most-1)/most])
		}
	}
	return "[" + b.String() + "]"
}
