package main

import (
	"errors"
	"fmt"
	"strings"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/spf13/cobra"
)

func newAuditCmd(g *globals) *cobra.Command {
	var f courier.AuditFilter
	var action, object string
	var since, until agoFlag
	var all bool
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "List the audit log: who changed the topology, and the operators' actions, newest first",
		Long: `Lists the audit log, newest first: every change of the topology held in the
store (create, replace, delete, rotate_secrets, with the version it made) and
every operator action (resubmit, discard, resend, replay, endpoint_off,
endpoint_on), each with the name of the key that did it ("local" without
keys). -o json adds each change's spec before and after, secrets shown as
"set". --since and --until take an RFC 3339 time or a duration meaning that
long ago.`,
		Example: `  courier audit
  courier audit --object endpoint --subject acme-primary
  courier audit --who ops --since 24h --all`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.check(); err != nil {
				return err
			}
			f.Kind = courier.ActionKind(action)
			if object != "" {
				k, err := parseKind(object)
				if err != nil {
					return fmt.Errorf("--object: %w", err)
				}
				f.Object = k
			}
			f.Since, f.Until = since.t, until.t
			if f.Limit < 0 || f.Limit > courier.MaxListLimit {
				return fmt.Errorf("--limit must be from 1 to %d", courier.MaxListLimit)
			}
			if all && f.Cursor != "" {
				return errors.New("--all reads every page from the first: leave out --cursor")
			}
			c := g.client()
			page, err := c.Audit(cmd.Context(), f)
			for err == nil && all && page.Next != "" {
				f.Cursor = page.Next
				var next *api.AuditPage
				if next, err = c.Audit(cmd.Context(), f); err == nil {
					page.Entries = append(page.Entries, next.Entries...)
					page.Next = next.Next
				}
			}
			if err != nil {
				return err
			}
			if g.output == "json" {
				return g.printJSON(page)
			}
			if err := tableOf(g, []string{"AT", "WHO", "ACTION", "OBJECT", "SUBJECT", "VERSION/DETAIL"}, page.Entries, auditRow); err != nil {
				return err
			}
			if page.Next != "" {
				fmt.Fprintf(g.stderr, "more: add --cursor %s, or --all\n", page.Next)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.Who, "who", "", "only what this key did (its name)")
	fl.StringVar(&action, "action", "", "only this action: create, replace, delete, rotate_secrets (the topology); resubmit, resend, discard, endpoint_off, endpoint_on, replay, claim_fetched")
	fl.StringVar(&object, "object", "", "only changes of this kind of object: endpoint, route, policy or subscription")
	fl.StringVar(&f.Subject, "subject", "", "only what was done to this object, endpoint or message")
	fl.Var(&since, "since", "only entries "+sinceUsage)
	fl.Var(&until, "until", "only entries "+untilUsage)
	fl.IntVar(&f.Limit, "limit", 0, fmt.Sprintf("entries per page (default %d, at most %d)", courier.DefaultListLimit, courier.MaxListLimit))
	fl.StringVar(&f.Cursor, "cursor", "", "continue a listing")
	fl.BoolVar(&all, "all", false, "read every page")
	return cmd
}

func auditRow(e api.AuditEntry) []string {
	var what []string
	if e.Version > 0 {
		what = append(what, fmt.Sprintf("version %d", e.Version))
	}
	if e.Detail != "" {
		what = append(what, e.Detail)
	}
	object := string(e.Object)
	if object == "" {
		object = "-"
	}
	return []string{e.At.Local().Format("2006-01-02 15:04:05"), e.Who, string(e.Action), object, e.Subject, short(strings.Join(what, "; "), 60)}
}
