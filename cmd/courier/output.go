package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
)

// check validates --output before any work is done.
func (g *globals) check() error {
	if g.output != "table" && g.output != "json" {
		return fmt.Errorf("--output must be table or json, not %q", g.output)
	}
	return nil
}

// client returns an API client for --server with the key of --api-key, or
// of COURIER_API_KEY when the flag is not given.
func (g *globals) client() *api.Client {
	key := g.apiKey
	if key == "" {
		key = os.Getenv("COURIER_API_KEY")
	}
	return api.NewClient(g.server, key).InTenant(g.tenant)
}

// printJSON writes v as indented JSON, with <, > and & as they are, as
// the API writes them.
func (g *globals) printJSON(v any) error {
	enc := json.NewEncoder(g.stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table writes rows under a header, aligned.
func (g *globals) table(header []string, rows [][]string) error {
	w := tabwriter.NewWriter(g.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(w, strings.Join(r, "\t"))
	}
	return w.Flush()
}

// tableOf prints items as a table under header, a row an item.
func tableOf[T any](g *globals, header []string, items []T, row func(T) []string) error {
	rows := make([][]string, len(items))
	for i, it := range items {
		rows[i] = row(it)
	}
	return g.table(header, rows)
}

// fields returns a printer of one "Name: value" line a field, the values
// aligned after width; empty values, and those in omit, are left out.
func (g *globals) fields(width int, omit ...string) func(name, value string) {
	return func(name, value string) {
		if value != "" && !slices.Contains(omit, value) {
			fmt.Fprintf(g.stdout, "%-*s %s\n", width, name+":", value)
		}
	}
}

// ago formats a time relative to now, for tables.
func ago(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	d := time.Until(*t).Round(time.Second)
	switch {
	case d > 0:
		return "in " + d.String()
	case d > -time.Second:
		return "now"
	default:
		return (-d).String() + " ago"
	}
}

// plural writes a count with its noun, in the plural unless the count is
// one: "1 message", "2 messages", "3 policies".
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	if len(noun) > 1 && strings.HasSuffix(noun, "y") && !strings.ContainsAny(noun[len(noun)-2:len(noun)-1], "aeiou") {
		return fmt.Sprintf("%d %sies", n, noun[:len(noun)-1])
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// short cuts text for a table cell.
func short(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		return s[:n-1] + "…"
	}
	if s == "" {
		return "-"
	}
	return s
}

func messageRow(m api.Message) []string {
	reason := string(m.Reason)
	if reason == "" {
		reason = "-"
	}
	return []string{courier.DeliveryKey(m.ID, m.Subscription), m.Type, m.Route, string(m.State), reason, fmt.Sprint(m.Attempts),
		nextAttempt(m.NextAttemptAt, m.Held), m.CreatedAt.Local().Format("2006-01-02 15:04:05"), short(m.LastError, 40)}
}

var messageHeader = []string{"ID", "TYPE", "ROUTE", "STATE", "REASON", "ATTEMPTS", "NEXT ATTEMPT", "CREATED", "LAST ERROR"}

// messageTable prints a page of messages as a table, and how to get the
// next page.
func (g *globals) messageTable(list *api.MessageList) error {
	if err := tableOf(g, messageHeader, list.Messages, messageRow); err != nil {
		return err
	}
	if list.NextCursor != "" {
		fmt.Fprintf(g.stderr, "more: add --cursor %s\n", list.NextCursor)
	}
	return nil
}

// startCPUProfile writes a CPU profile to path until stop is called; an
// empty path profiles nothing.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
