package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/config"
	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"
)

func newTenantsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "tenants",
		Aliases: []string{"tenant"},
		Short:   "Tenants: their weights, quotas and use",
	}
	cmd.AddCommand(newListCmd(g, "List the tenants with their use against their quotas (a tenant's key sees its own)",
		(*api.Client).Tenants, func(list *api.TenantList) []api.TenantView { return list.Tenants },
		[]string{"NAME", "WEIGHT", "QUEUED", "BYTES", "ENDPOINTS", "INGEST RATE", "RETENTION"},
		func(t api.TenantView) []string {
			return []string{t.Name, fmt.Sprint(t.Weight), ofQuota(t.Use.Queued, int64(t.Quotas.MaxQueued), count),
				ofQuota(t.Use.Bytes, t.Quotas.MaxBytes, func(n int64) string { return humanize.IBytes(uint64(n)) }),
				ofQuota(int64(t.Endpoints), int64(t.Quotas.MaxEndpoints), count), orDash(t.Quotas.IngestRate), orDash(t.Retention)}
		}))
	cmd.AddCommand(newTenantsWriteCmd(g, true), newTenantsWriteCmd(g, false), newTenantsShowCmd(g), newTenantsDeleteCmd(g), newTenantsErasingCmd(g))
	return cmd
}

// tenantFlags are the settings a tenant is created or changed with; set
// says which were given.
type tenantFlags struct {
	weight, burst, maxQueued, maxEndpoints, maxPerHour int
	ingestRate, maxBytes, retention                    string
	notify                                             []string
}

func (f *tenantFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.IntVar(&f.weight, "weight", 1, "its share of scarce capacity against the other waiting tenants'")
	fl.StringVar(&f.ingestRate, "ingest-rate", "", "messages accepted per period (100/s)")
	fl.IntVar(&f.burst, "burst", 0, "with --ingest-rate: how many may come at once (default one period's)")
	fl.IntVar(&f.maxQueued, "max-queued", 0, "messages not yet finished it may hold")
	fl.StringVar(&f.maxBytes, "max-bytes", "", "bytes of those messages' payloads it may hold (1GiB)")
	fl.IntVar(&f.maxEndpoints, "max-endpoints", 0, "endpoints it may have")
	fl.StringVar(&f.retention, "retention", "", "keep its finished messages this long (720h; default the server's)")
	fl.StringSliceVar(&f.notify, "notify", nil, "its alert targets: its endpoints (or system/NAME) told of its endpoints' and routes' events")
	fl.IntVar(&f.maxPerHour, "max-per-hour", 0, "events per subject in an hour that send its alert targets notices (default 6)")
}

// apply writes the flags given over spec: all of them for a new tenant,
// only those given for a change.
func (f *tenantFlags) apply(cmd *cobra.Command, spec *api.TenantSpec) error {
	given := cmd.Flags().Changed
	if spec.Quotas == nil {
		spec.Quotas = &api.QuotasView{}
	}
	if spec.Alerts == nil {
		spec.Alerts = &api.TenantAlertsView{}
	}
	q, a := spec.Quotas, spec.Alerts
	if given("weight") || spec.Weight == 0 {
		spec.Weight = f.weight
	}
	if given("ingest-rate") {
		q.IngestRate = f.ingestRate
		if !given("burst") {
			q.Burst = 0 // one period's, of the new rate
		}
	}
	if given("burst") {
		q.Burst = f.burst
	}
	if given("max-queued") {
		q.MaxQueued = f.maxQueued
	}
	if given("max-bytes") {
		n, err := config.ParseSize(f.maxBytes)
		if err != nil {
			return fmt.Errorf("--max-bytes: %w", err)
		}
		q.MaxBytes = n
	}
	if given("max-endpoints") {
		q.MaxEndpoints = f.maxEndpoints
	}
	if given("retention") {
		spec.Retention = f.retention
	}
	if given("notify") {
		a.Notify = f.notify
	}
	if given("max-per-hour") {
		a.MaxPerHour = f.maxPerHour
	}
	if *q == (api.QuotasView{}) {
		spec.Quotas = nil
	}
	if len(a.Notify) == 0 && a.MaxPerHour == 0 {
		spec.Alerts = nil
	}
	return nil
}

// specOf is the settings of a tenant as shown, for a change of some.
func specOf(v *api.TenantView) api.TenantSpec {
	q := v.Quotas
	return api.TenantSpec{Weight: v.Weight, Quotas: &q, Retention: v.Retention, Alerts: v.Alerts}
}

// newTenantsWriteCmd is tenants create (create) or tenants set.
func newTenantsWriteCmd(g *globals, create bool) *cobra.Command {
	var f tenantFlags
	cmd := &cobra.Command{
		Use:   "create NAME [--weight N] [--ingest-rate 100/s] [--burst N] [--max-queued N] [--max-bytes 1GiB] [--max-endpoints N] [--retention 720h] [--notify a,b]",
		Short: "Create a tenant with its settings (a key of the system tenant)",
		Long: `Creates a tenant in the server's store with the settings given, as the
configuration file's tenants.NAME would give them; those not given have
their defaults. The tenant's objects and keys are then written under
/v1/tenants/NAME/ (--tenant NAME). A server whose configuration file has a
tenants: section keeps its tenants there and refuses.`,
		Example: `  courier tenants create acme --weight 2 --ingest-rate 100/s --max-queued 100000 --max-bytes 1GiB
  courier tenants create beta --retention 720h --notify pager`,
		Args: cobra.ExactArgs(1),
	}
	if !create {
		cmd.Use = "set NAME [the flags of create]"
		cmd.Short = "Change some of a tenant's settings, those given (a key of the system tenant)"
		cmd.Long = `Changes the settings given of a tenant and keeps the others; --notify
replaces the list of alert targets (--notify '' empties it).`
		cmd.Example = `  courier tenants set acme --max-queued 200000
  courier tenants set acme --notify pager,system/ops --max-per-hour 3`
	}
	cmd.RunE = askServer(g, func(ctx context.Context, c *api.Client, args []string) (*api.TopologyObject, error) {
		var spec api.TenantSpec
		if !create {
			v, err := c.Tenant(ctx, args[0])
			if err != nil {
				return nil, err
			}
			spec = specOf(v)
		}
		if err := f.apply(cmd, &spec); err != nil {
			return nil, err
		}
		ifMatch := int64(-1)
		if create {
			ifMatch = 0 // a tenant that exists is changed by set
		}
		o, _, err := c.PutTenant(ctx, args[0], spec, ifMatch)
		if courier.ErrorCode(err) == courier.CodeFailedPrecondition && create {
			return nil, fmt.Errorf("tenant %s exists already: change its settings with courier tenants set", args[0])
		}
		if err != nil {
			return nil, plainConflict(err)
		}
		return o, nil
	}, func(o *api.TopologyObject) error {
		verb := "set"
		if create {
			verb = "created"
		}
		fmt.Fprintf(g.stdout, "tenant %s %s (version %d)\n", o.Name, verb, o.Version)
		return nil
	})
	f.add(cmd)
	return cmd
}

func newTenantsShowCmd(g *globals) *cobra.Command {
	return newNameCmd(g, "show NAME", "Show a tenant's settings, alert targets and use", (*api.Client).Tenant, func(v *api.TenantView) error {
		field := g.fields(14, "0")
		field("Name", v.Name)
		field("Weight", fmt.Sprint(v.Weight))
		q := v.Quotas
		field("Ingest rate", q.IngestRate)
		field("Burst", fmt.Sprint(q.Burst))
		field("Queued", ofQuota(v.Use.Queued, int64(q.MaxQueued), count))
		field("Bytes", ofQuota(v.Use.Bytes, q.MaxBytes, func(n int64) string { return humanize.IBytes(uint64(n)) }))
		field("Endpoints", ofQuota(int64(v.Endpoints), int64(q.MaxEndpoints), count))
		field("Retention", orDash(v.Retention))
		if a := v.Alerts; a != nil {
			field("Alerts", strings.Join(a.Notify, ", "))
			field("Max per hour", fmt.Sprint(a.MaxPerHour))
		}
		if v.Throttled {
			field("Throttled", v.ThrottledBy)
		}
		return nil
	})
}

func newTenantsDeleteCmd(g *globals) *cobra.Command {
	var yes, wait bool
	cmd := &cobra.Command{
		Use:   "delete NAME [--yes] [--wait]",
		Short: "Delete a tenant with everything it owns, and erase its messages",
		Long: `Deletes a tenant: its settings and every endpoint, route, policy,
subscription and key it owns go at once, as one change of the topology,
and from then on nothing of it can be ingested or called. Its messages,
their attempts and payloads are then erased by a bulk operation of the
server's, in batches that survive a restart; this command prints the
operation and how to follow it, or with --wait shows its progress until
it is done (interrupting the command does not stop it). It cannot be
undone: without --yes, it asks for the tenant's name to be typed.`,
		Example: `  courier tenants delete acme
  courier tenants delete acme --yes --wait`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.check(); err != nil {
				return err
			}
			name := args[0]
			if !yes {
				if err := confirm(cmd, g, name); err != nil {
					return err
				}
			}
			c := g.client()
			op, err := c.DeleteTenant(cmd.Context(), name)
			if err != nil {
				return plainConflict(err)
			}
			if wait {
				if op, err = followErase(cmd.Context(), g, c, op); err != nil {
					return err
				}
			}
			if g.output == "json" {
				return g.printJSON(op)
			}
			fmt.Fprintf(g.stdout, "tenant %s deleted\n", name)
			if op.Done {
				fmt.Fprintf(g.stdout, "its messages are erased (%s, operation %s)\n", plural(op.Count, "message"), op.ID)
				return nil
			}
			fmt.Fprintf(g.stdout, "its messages are being erased by operation %s; follow it with:\n  courier tenants erasing %s --wait\n", op.ID, op.ID)
			return nil
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask: delete at once")
	cmd.Flags().BoolVar(&wait, "wait", false, "show the erasing's progress until it is done")
	return cmd
}

func newTenantsErasingCmd(g *globals) *cobra.Command {
	var wait bool
	cmd := newNameCmd(g, "erasing OPERATION [--wait]", "Show how far the erasing of a deleted tenant's messages got",
		func(c *api.Client, ctx context.Context, id string) (*api.Operation, error) {
			op, err := c.InTenant(courier.SystemTenant).Operation(ctx, id)
			if err == nil && wait {
				op, err = followErase(ctx, g, c, op)
			}
			return op, err
		}, func(op *api.Operation) error {
			state := fmt.Sprintf("%.1f%% done", 100*op.Progress)
			if op.Done {
				state = "done"
			}
			fmt.Fprintf(g.stdout, "erasing tenant %s: %s erased, %s (operation %s, by %s)\n", op.Tenant, plural(op.Count, "message"), state, op.ID, op.Who)
			return nil
		})
	cmd.Flags().BoolVar(&wait, "wait", false, "show its progress until it is done")
	return cmd
}

// followErase shows the progress of the operation that erases a deleted
// tenant's messages until it is done; the operation is the system
// tenant's.
func followErase(ctx context.Context, g *globals, c *api.Client, op *api.Operation) (*api.Operation, error) {
	system := c.InTenant(courier.SystemTenant)
	for !op.Done {
		fmt.Fprintf(g.stderr, "\r%s %5.1f%%  %s erased", bar(op.Progress, 30), 100*op.Progress, plural(op.Count, "message"))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		var err error
		if op, err = system.Operation(ctx, op.ID); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(g.stderr, "\r%s %5.1f%%  %s erased\n", bar(1, 30), 100.0, plural(op.Count, "message"))
	return op, nil
}

// confirm asks for the tenant's name to be typed before it is deleted;
// without a terminal to ask at, --yes is needed.
func confirm(cmd *cobra.Command, g *globals, name string) error {
	in := cmd.InOrStdin()
	if f, ok := in.(*os.File); !ok || !isTerminal(f) {
		return fmt.Errorf("deleting tenant %s deletes everything it owns and erases its messages; give --yes to do it", name)
	}
	fmt.Fprintf(g.stderr, "Deleting tenant %s deletes its endpoints, routes, policies, subscriptions and keys, and erases its messages. Type its name to go on: ", name)
	line, _ := bufio.NewReader(in).ReadString('\n')
	if strings.TrimSpace(line) != name {
		return fmt.Errorf("not confirmed: nothing was deleted")
	}
	return nil
}

// isTerminal reports whether f is a terminal (a character device).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
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
