package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/courier-gw/courier/api"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

func newSubscriptionsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "subscriptions",
		Aliases: []string{"subscription", "subs"},
		Short:   "Replay earlier messages to a subscription",
	}
	cmd.AddCommand(newReplayCmd(g))
	return cmd
}

func newReplayCmd(g *globals) *cobra.Command {
	var since, until agoFlag
	var types []string
	var again bool
	cmd := &cobra.Command{
		Use:   "replay NAME --since TIME [--until TIME]",
		Short: "Give a subscription a delivery of every retained message it wants from a span of time",
		Long: `Gives the subscription a delivery of every retained published message it
wants that was ingested from --since until --until (default now), and has
none for it; with --again, also delivers again those it had. The server does
it in batches that survive a restart; this command shows its progress until
it is done (interrupting the command does not stop the replay). The
deliveries go at the pace the endpoint's limits allow. The replay is one
entry of the audit log (action replay, the subscription as subject).
--since and --until take an RFC 3339 time or a duration meaning that long
ago.`,
		Example: `  courier subscriptions replay erp-orders --since 2026-11-24T00:00:00Z
  courier subscriptions replay erp-orders --since 1h
  courier subscriptions replay audit --since 2026-11-01T00:00:00Z --types order.created --again`,
		Args: cobra.ExactArgs(1),
		RunE: askServer(g, func(ctx context.Context, c *api.Client, args []string) (*api.Operation, error) {
			id, err := uuid.NewV7()
			if err != nil {
				return nil, err
			}
			req := api.ReplayRequest{Since: since.ptr(), Until: until.ptr(), Types: types, Again: again, OperationID: "replay-" + id.String()}
			op, err := c.Replay(ctx, args[0], req)
			for err == nil && !op.Done {
				fmt.Fprintf(g.stderr, "\r%s %5.1f%%  %s", bar(op.Progress, 30), 100*op.Progress, plural(op.Count, "delivery"))
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(250 * time.Millisecond):
				}
				op, err = c.Operation(ctx, op.ID)
			}
			if err == nil {
				fmt.Fprintf(g.stderr, "\r%s %5.1f%%  %s\n", bar(1, 30), 100.0, plural(op.Count, "delivery"))
			}
			return op, err
		}, func(op *api.Operation) error {
			fmt.Fprintf(g.stdout, "replayed %s to %s (operation %s)\n", plural(op.Count, "delivery"), op.Replay.Subscription, op.ID)
			return nil
		}),
	}
	fl := cmd.Flags()
	fl.Var(&since, "since", "replay the messages ingested "+sinceUsage+" (required)")
	fl.Var(&until, "until", "replay the messages ingested "+untilUsage+" (default now)")
	fl.StringSliceVar(&types, "types", nil, "only these types (exact, or a prefix ending in .*), of those the subscription wants")
	fl.BoolVar(&again, "again", false, "also deliver again the messages it has a delivery of, delivered or not")
	cmd.MarkFlagRequired("since")
	return cmd
}

// bar draws a progress bar of width characters, done from 0 to 1.
func bar(done float64, width int) string {
	n := int(done * float64(width))
	n = max(0, min(n, width))
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}
