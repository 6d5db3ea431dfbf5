package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	courier "github.com/courier-gw/courier"
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
		newListCmd(g, "List endpoints with their health", func(c *api.Client, ctx context.Context) (api.EndpointList, error) {
			eps, err := c.Endpoints(ctx)
			return api.EndpointList{Endpoints: eps}, err
		}, func(list api.EndpointList) []api.Endpoint { return list.Endpoints },
			[]string{"NAME", "TRANSPORT", "STATE", "SUSPENDED UNTIL", "IN FLIGHT", "QUEUED", "DELIVERED 1H", "FAILED 1H", "TARGET"},
			func(e api.Endpoint) []string {
				return []string{e.Name, string(e.Transport), string(e.State), until(e.SuspendedUntil),
					fmt.Sprint(e.InFlight), fmt.Sprint(e.Queued), fmt.Sprint(e.LastHour["delivered"]), fmt.Sprint(failures(e.LastHour)),
					short(e.Target, 40)}
			}),
		newNameCmd(g, "show NAME", "Show one endpoint, its health and the operator actions on it", (*api.Client).Endpoint, func(e *api.Endpoint) error {
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
			if a := e.Auth; a != nil {
				field("Auth", a.Type)
				if a.TokenExpiresAt != nil {
					field("Token expires", until(a.TokenExpiresAt))
				}
				if a.LastFailureAt != nil {
					field("Auth failure", until(a.LastFailureAt)+": "+a.LastFailure)
				}
			}
			for _, a := range e.Actions {
				field("Action", fmt.Sprintf("%s %s by %s", a.At.Local().Format(time.RFC3339), a.Kind, a.Who))
			}
			return nil
		}),
		newEndpointSwitchCmd(g, false),
		newEndpointSwitchCmd(g, true),
		newEndpointTestCmd(g),
	)
	return cmd
}

// newEndpointSwitchCmd is `endpoints off` (or on): one endpoint by name,
// or every endpoint a filter selects, in one request.
func newEndpointSwitchCmd(g *globals, on bool) *cobra.Command {
	verb := map[bool]string{true: "on", false: "off"}[on]
	var f api.EndpointFilter
	var transport, state string
	cmd := &cobra.Command{
		Use: verb + " [NAME]",
		Short: map[bool]string{true: "Switch an endpoint on again (or all a filter selects): its held messages go out as each comes due",
			false: "Switch an endpoint off (or all a filter selects): its messages are held, not failed, until it is on again"}[on],
		Long: `Switch one endpoint ` + verb + ` by its name, or, with --prefix, --transport, --host
or --state instead of a name, every endpoint that matches all the flags given,
in one request. Each endpoint switched is recorded in the audit log, with the
filter that selected it. Endpoints that are ` + map[bool]string{true: "active", false: "off"}[on] + ` already are left as they are.`,
		Example: `  courier endpoints ` + verb + ` crm
  courier endpoints ` + verb + ` --prefix crm- --transport http
  courier endpoints ` + verb + ` --host crm.example.com --state suspended`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.check(); err != nil {
				return err
			}
			f.Transport, f.State = courier.Transport(transport), courier.HealthState(state)
			byFilter := f != (api.EndpointFilter{})
			switch {
			case len(args) == 1 && byFilter:
				return fmt.Errorf("give an endpoint's name or filter flags, not both")
			case len(args) == 0 && !byFilter:
				return fmt.Errorf("give an endpoint's name, or at least one of --prefix, --transport, --host and --state")
			case len(args) == 1:
				e, err := g.client().SwitchEndpoint(cmd.Context(), args[0], on)
				if err != nil {
					return err
				}
				if g.output == "json" {
					return g.printJSON(e)
				}
				fmt.Fprintf(g.stdout, "endpoint %s is %s\n", e.Name, e.State)
				return nil
			}
			res, err := g.client().SwitchEndpoints(cmd.Context(), on, f)
			if err != nil {
				return err
			}
			if g.output == "json" {
				return g.printJSON(res)
			}
			for _, name := range res.Endpoints {
				fmt.Fprintf(g.stdout, "endpoint %s is %s\n", name, res.State)
			}
			fmt.Fprintf(g.stdout, "%s switched %s\n", countEndpoints(res.Count), verb)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.NamePrefix, "prefix", "", "every endpoint whose name starts with this")
	fl.StringVar(&transport, "transport", "", "every endpoint of this transport (http, smtp, file, amqp, nats)")
	fl.StringVar(&f.Host, "host", "", "every endpoint that reaches this host (of its URL or SMTP server; with or without the port)")
	fl.StringVar(&state, "state", "", "every endpoint in this state (active, timeout, suspended, off)")
	return cmd
}

// newEndpointTestCmd is `endpoints test NAME`: one sample message to the
// endpoint, now, and what its receiver answered.
func newEndpointTestCmd(g *globals) *cobra.Command {
	var req api.EndpointTestRequest
	var payload string
	cmd := &cobra.Command{
		Use:   "test NAME",
		Short: "Send a test message to an endpoint and show what its receiver answered",
		Long: `Send one sample message to an endpoint now, with its credentials and headers,
and print what the receiver answered: the status, the start of its body and
the time taken. It is no delivery: nothing is stored or retried, and the
endpoint's health is left as it is, so an endpoint switched off can be tried
before it is switched on. Exits with status 1 when the receiver did not take it.`,
		Example: `  courier endpoints test crm
  courier endpoints test crm --type invoice --payload '{"total": 42}'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.check(); err != nil {
				return err
			}
			if payload != "" {
				req.Payload = json.RawMessage(payload)
				if !json.Valid(req.Payload) {
					return fmt.Errorf("--payload is not JSON")
				}
			}
			res, err := g.client().TestEndpoint(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			if g.output == "json" {
				if err := g.printJSON(res); err != nil {
					return err
				}
			} else {
				field := g.fields(10)
				field("Endpoint", res.Endpoint)
				if res.Delivered {
					field("Result", "delivered")
				} else {
					field("Result", "failed ("+string(res.Class)+")")
					field("Error", res.Error)
				}
				if res.Status != 0 {
					field("Status", fmt.Sprint(res.Status))
				}
				field("Response", short(res.Response, 200))
				field("Took", (time.Duration(res.DurationMS) * time.Millisecond).String())
				field("Message", res.MessageID)
			}
			if !res.Delivered {
				return fmt.Errorf("the receiver did not take the test message")
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&req.Type, "type", "", "the message type sent as Courier-Type (default "+api.TestType+")")
	fl.StringVar(&payload, "payload", "", "the JSON to send (default a small sample)")
	return cmd
}

// countEndpoints says "1 endpoint", "2 endpoints".
func countEndpoints(n int) string {
	if n == 1 {
		return "1 endpoint"
	}
	return fmt.Sprintf("%d endpoints", n)
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
