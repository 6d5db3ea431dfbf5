package main

import (
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
			RunE: func(cmd *cobra.Command, args []string) error {
				if err := g.check(); err != nil {
					return err
				}
				eps, err := g.client().Endpoints(cmd.Context())
				if err != nil {
					return err
				}
				if g.output == "json" {
					return g.printJSON(api.EndpointList{Endpoints: eps})
				}
				rows := make([][]string, len(eps))
				for i, e := range eps {
					rows[i] = []string{e.Name, string(e.Transport), string(e.State), until(e.SuspendedUntil),
						fmt.Sprint(e.InFlight), fmt.Sprint(e.Queued), fmt.Sprint(e.LastHour["delivered"]), fmt.Sprint(failures(e.LastHour)),
						short(e.Target, 40)}
				}
				return g.table([]string{"NAME", "TRANSPORT", "STATE", "SUSPENDED UNTIL", "IN FLIGHT", "QUEUED", "DELIVERED 1H", "FAILED 1H", "TARGET"}, rows)
			},
		},
		&cobra.Command{
			Use:   "show NAME",
			Short: "Show one endpoint, its health and the operator actions on it",
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				if err := g.check(); err != nil {
					return err
				}
				e, err := g.client().Endpoint(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if g.output == "json" {
					return g.printJSON(e)
				}
				field := func(name, value string) {
					if value != "" {
						fmt.Fprintf(g.stdout, "%-16s %s\n", name+":", value)
					}
				}
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
				field("Concurrency", fmt.Sprint(e.MaxConcurrency))
				field("Min interval", e.MinInterval)
				field("Rate", e.Rate)
				for _, a := range e.Actions {
					field("Action", fmt.Sprintf("%s %s by %s", a.At.Local().Format(time.RFC3339), a.Kind, a.Who))
				}
				return nil
			},
		},
		newSwitchCmd(g, false),
		newSwitchCmd(g, true),
	)
	return cmd
}

func newSwitchCmd(g *globals, on bool) *cobra.Command {
	verb := map[bool]string{true: "on", false: "off"}[on]
	return &cobra.Command{
		Use: verb + " NAME",
		Short: map[bool]string{true: "Switch an endpoint on again: its held messages go out",
			false: "Switch an endpoint off: its messages are held, not failed, until it is on again"}[on],
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.check(); err != nil {
				return err
			}
			e, err := g.client().SwitchEndpoint(cmd.Context(), args[0], on)
			if err != nil {
				return err
			}
			if g.output == "json" {
				return g.printJSON(e)
			}
			fmt.Fprintf(g.stdout, "endpoint %s is %s\n", e.Name, e.State)
			return nil
		},
	}
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
