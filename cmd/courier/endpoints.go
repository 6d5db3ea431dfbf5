package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/courier-gw/courier/api"
	"github.com/spf13/cobra"
)

func newEndpointsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "endpoints",
		Aliases: []string{"endpoint", "ep"},
		Short:   "Endpoint health, and switching endpoints off and on",
	}
	cmd.AddCommand(
		&cobra.Command{
			Use:   "list",
			Short: "List endpoints with their health",
			Args:  cobra.NoArgs,
			RunE: askServer(g, func(ctx context.Context, c *api.Client, _ []string) (api.EndpointList, error) {
				eps, err := c.Endpoints(ctx)
				return api.EndpointList{Endpoints: eps}, err
			}, func(list api.EndpointList) error {
				return tableOf(g, []string{"NAME", "TRANSPORT", "STATE", "SUSPENDED UNTIL", "IN FLIGHT", "QUEUED", "DELIVERED 1H", "FAILED 1H", "TARGET"},
					list.Endpoints, func(e api.Endpoint) []string {
						return []string{e.Name, string(e.Transport), string(e.State), until(e.SuspendedUntil),
							fmt.Sprint(e.InFlight), fmt.Sprint(e.Queued), fmt.Sprint(e.LastHour["delivered"]), fmt.Sprint(failures(e.LastHour)),
							short(e.Target, 40)}
					})
			}),
		},
		&cobra.Command{
			Use:   "show NAME",
			Short: "Show one endpoint, its health and the operator actions on it",
			Args:  cobra.ExactArgs(1),
			RunE: askServer(g, func(ctx context.Context, c *api.Client, args []string) (*api.Endpoint, error) {
				return c.Endpoint(ctx, args[0])
			}, func(e *api.Endpoint) error {
				field := g.fields(16)
				field("Name", e.Name)
				field("Transport", string(e.Transport))
				field("Target", e.Target)
				field("State", string(e.State))
				if e.SuspendedUntil != nil {
					field("Suspended until", until(e.SuspendedUntil))
				}
				field("Failures", fmt.Sprint(e.Failures))
				field("In flight", fmt.Sprint(e.InFlight))
				field("Queued", fmt.Sprint(e.Queued))
				for _, k := range slices.Sorted(maps.Keys(e.LastHour)) {
					field("Last hour", fmt.Sprintf("%s %d", k, e.LastHour[k]))
				}
				field("Suspensions", fmt.Sprint(e.Suspensions))
				field("Timeout", e.Timeout)
				if e.ConcurrencyAuto {
					field("Concurrency", fmt.Sprintf("auto: %d now, up to %d", e.ConcurrencyLimit, e.MaxConcurrency))
				} else {
					field("Concurrency", fmt.Sprint(e.MaxConcurrency))
				}
				field("Min interval", e.MinInterval)
				field("Rate", e.Rate)
				for _, a := range e.Actions {
					field("Action", fmt.Sprintf("%s %s by %s", a.At.Local().Format(time.RFC3339), a.Kind, a.Who))
				}
				return nil
			}),
		},
		newEndpointSwitchCmd(g, false),
		newEndpointSwitchCmd(g, true),
	)
	return cmd
}

func newEndpointSwitchCmd(g *globals, on bool) *cobra.Command {
	return newSwitchCmd(g, map[bool]string{true: "on", false: "off"}[on],
		map[bool]string{true: "Switch an endpoint on again: its held messages go out",
			false: "Switch an endpoint off: its messages are held, not failed, until it is on again"}[on],
		"endpoint", func(ctx context.Context, c *api.Client, name string) (*api.Endpoint, error) {
			return c.SwitchEndpoint(ctx, name, on)
		}, func(e *api.Endpoint) (string, string) { return e.Name, string(e.State) })
}

// until formats a time for a table, or "-".
func until(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05") + " (" + ago(t) + ")"
}

// failures adds up the outcomes that are not deliveries.
func failures(outcomes map[string]int) int {
	n := 0
	for k, v := range outcomes {
		if k != "delivered" {
			n += v
		}
	}
	return n
}
