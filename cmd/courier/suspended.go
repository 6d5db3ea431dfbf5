package main

import (
	"context"
	"fmt"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/internal/startstop"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// suspendedFilter holds the filter flags of the suspended commands.
type suspendedFilter struct {
	typ, route, endpoint, reason string
	since                        agoFlag
}

func (f *suspendedFilter) flags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.typ, "type", "", "only messages of this type")
	fl.StringVar(&f.route, "route", "", "only messages of this route")
	fl.StringVar(&f.endpoint, "endpoint", "", "only messages whose latest attempt went to this endpoint")
	fl.StringVar(&f.reason, "reason", "", "only messages suspended for this reason (exhausted, rejected, expired, ...)")
	fl.Var(&f.since, "since", "only messages ingested "+sinceUsage)
}

func (f *suspendedFilter) filter() api.Filter {
	out := api.Filter{State: courier.StateSuspended, Type: f.typ, Route: f.route, Endpoint: f.endpoint, Reason: courier.Reason(f.reason)}
	out.CreatedAfter = f.since.ptr()
	return out
}

func newSuspendedCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "suspended",
		Short: "The suspended queue: list, resubmit or discard what matches a filter",
		Long: `The suspended queue holds the messages courier will not retry without an
operator, each with its whole error history. List them, then resubmit (after
fixing the receiver or the route) or discard them, one by one with
'courier messages resubmit|discard ID' or all that match a filter here.`,
	}
	cmd.AddCommand(newSuspendedListCmd(g), newSuspendedBulkCmd(g, courier.ActionResubmit), newSuspendedBulkCmd(g, courier.ActionDiscard))
	return cmd
}

func newSuspendedListCmd(g *globals) *cobra.Command {
	var f suspendedFilter
	var limit int
	var cursor string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List suspended messages, newest first",
		Args:  cobra.NoArgs,
		RunE: askServer(g, func(ctx context.Context, c *api.Client, _ []string) (*api.MessageList, error) {
			af := f.filter()
			mf := courier.MessageFilter{State: af.State, Type: af.Type, Route: af.Route, Endpoint: af.Endpoint,
				Reason: af.Reason, Limit: limit, Cursor: cursor}
			if af.CreatedAfter != nil {
				mf.CreatedAfter = *af.CreatedAfter
			}
			return c.Messages(ctx, mf)
		}, g.messageTable),
	}
	f.flags(cmd)
	cmd.Flags().IntVar(&limit, "limit", 50, "messages per page (at most 1000)")
	cmd.Flags().StringVar(&cursor, "cursor", "", "continue a listing")
	return cmd
}

func newSuspendedBulkCmd(g *globals, kind courier.ActionKind) *cobra.Command {
	var f suspendedFilter
	var toRoute string
	verb := map[courier.ActionKind]string{courier.ActionResubmit: "resubmitted", courier.ActionDiscard: "discarded"}[kind]
	cmd := &cobra.Command{
		Use:   string(kind),
		Short: map[courier.ActionKind]string{courier.ActionResubmit: "Resubmit every suspended message that matches", courier.ActionDiscard: "Discard every suspended message that matches"}[kind],
		Long: `Works on every suspended message that matches the filter when the command
starts, in batches that survive a restart of the server, and shows how far it
got. Each message's change is recorded as an operator action.`,
		Args: cobra.NoArgs,
		RunE: askServer(g, func(ctx context.Context, c *api.Client, _ []string) (*api.Operation, error) {
			id, err := uuid.NewV7()
			if err != nil {
				return nil, err
			}
			req := api.BulkRequest{Filter: f.filter(), Route: toRoute, OperationID: "op-" + id.String()}
			watching, stop := context.WithCancel(ctx)
			defer stop()
			go watchOperation(watching, g, c, req.OperationID, verb)
			return c.Bulk(ctx, kind, req)
		}, func(op *api.Operation) error {
			fmt.Fprintf(g.stdout, "%s %s (operation %s)\n", verb, plural(op.Count, "message"), op.ID)
			return nil
		}),
	}
	f.flags(cmd)
	if kind == courier.ActionResubmit {
		cmd.Flags().StringVar(&toRoute, "to-route", "", "resubmit to this route instead of each message's own")
	}
	return cmd
}

// watchOperation prints the progress of a bulk operation until ctx ends.
func watchOperation(ctx context.Context, g *globals, c *api.Client, id, verb string) {
	const every = 500 * time.Millisecond
	startstop.Every(ctx, every, every, func(ctx context.Context) {
		if op, err := c.Operation(ctx, id); err == nil && !op.Done {
			fmt.Fprintf(g.stderr, "  %s %d so far...\n", verb, op.Count)
		}
	})
}
