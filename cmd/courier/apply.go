package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/config"
	"github.com/courier-gw/courier/topology"
	"github.com/spf13/cobra"
)

func newApplyCmd(g *globals) *cobra.Command {
	var file string
	var dryRun, prune bool
	cmd := &cobra.Command{
		Use:   "apply [-f] FILE",
		Short: "Make the topology held in the store hold a file's endpoints, routes, policies, subscriptions and tenants",
		Long: `Reads the sections endpoints, routes, policies and subscriptions of a
configuration file and makes the server's topology hold them: what is new is
created, what differs is replaced, what is the same is left alone, all as one
version or, if anything is wrong, not at all. It prints each change, with the
fields a replace changed.

The file is checked first, as 'courier config check' does, with the same
rules (other sections, such as listen or keys, are checked but not sent); a
file with an error changes nothing. What depends on the server's settings is
checked by the server: an endpoint with a claim_check needs the server's
public_url, not one in the file or this shell's environment. An http
endpoint whose URL the server's SSRF guard refuses is applied, and the
server's warning printed. ${NAME} in a value is replaced by this shell's
environment variable NAME. A secret written as "set" (as 'courier get'
prints it) keeps the secret the server has stored.

A tenants: section gives tenants their settings (a key of the system
tenant applies them, without --tenant). With --tenant NAME the file is one
tenant's topology, its names plain: the server qualifies them with the
tenant, and --prune deletes only that tenant's objects.

With --prune, the objects the file does not hold are deleted, in every
section: a section the file leaves out counts as empty. Tenants are never
pruned (courier tenants delete deletes one). With --dry-run, nothing is
written: the changes are printed as they would be made.`,
		Example: `  courier apply -f topology.yaml --dry-run
  courier apply -f topology.yaml
  courier get topology > topology.yaml; vi topology.yaml; courier apply -f topology.yaml --prune
  courier apply --tenant acme acme.yaml --prune`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.check(); err != nil {
				return err
			}
			switch {
			case len(args) == 1 && file != "":
				return fmt.Errorf("give the file once: as -f FILE or as the argument")
			case len(args) == 1:
				file = args[0]
			case file == "":
				return fmt.Errorf("give the file to apply: courier apply FILE")
			}
			// The server checks what depends on its own settings (a claim
			// check needs its public_url), not this shell's environment.
			cfg, err := config.LoadTopology(file)
			if err != nil {
				fmt.Fprintln(g.stderr, err)
				fmt.Fprintln(g.stderr, "nothing was applied")
				return exitError(1)
			}
			if cfg.TopologyInStore && cfg.Topology.Tenants == nil {
				return fmt.Errorf("%s has none of the sections endpoints, routes, policies, subscriptions and tenants: there is nothing to apply", file)
			}
			var t api.Topology
			for kind, objs := range cfg.Specs {
				section := make(map[string]json.RawMessage, len(objs))
				for name, spec := range objs {
					section[name] = spec
				}
				*t.Section(kind) = section
			}
			res, err := g.client().Apply(cmd.Context(), t, prune, dryRun)
			if err != nil {
				return plainConflict(err)
			}
			for _, w := range res.Warnings {
				fmt.Fprintln(g.stderr, "warning:", w)
			}
			if g.output == "json" {
				return g.printJSON(res)
			}
			return printChanges(g.stdout, res)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&file, "filename", "f", "", "the configuration file to apply (or give it as the argument)")
	fl.BoolVar(&dryRun, "dry-run", false, "print what would change, and change nothing")
	fl.BoolVar(&prune, "prune", false, "also delete the objects the file does not hold")
	return cmd
}

// changeVerbs say what a change did to an object, as kubectl apply does.
var changeVerbs = map[courier.ActionKind]string{
	courier.ActionCreate:  "created",
	courier.ActionReplace: "configured",
	courier.ActionDelete:  "deleted",
}

// printChanges writes a line per change, the fields a replace changed
// below it, and a summary.
func printChanges(w io.Writer, res *api.ApplyResult) error {
	dry := ""
	if res.DryRun {
		dry = " (dry run)"
	}
	for _, c := range res.Changes {
		verb := changeVerbs[c.Action]
		if verb == "" {
			verb = string(c.Action)
		}
		fmt.Fprintf(w, "%s/%s %s%s\n", c.Kind, c.Name, verb, dry)
		if c.Action != courier.ActionReplace {
			continue
		}
		lines, err := specDiff(c.Before, c.After)
		if err != nil {
			return fmt.Errorf("%s %q: %w", c.Kind, c.Name, err)
		}
		if len(lines) == 0 {
			// Secrets are shown as "set" on both sides.
			lines = []string{"    a secret changed (secrets are not shown)"}
		}
		for _, l := range lines {
			fmt.Fprintln(w, l)
		}
	}
	n := len(res.Changes)
	switch {
	case n == 0:
		fmt.Fprintf(w, "nothing to change (version %d)\n", res.Version)
	case res.DryRun:
		fmt.Fprintf(w, "%d to change (dry run: nothing written)\n", n)
	default:
		fmt.Fprintf(w, "%d changed, version %d\n", n, res.Version)
	}
	return nil
}

// specDiff compares two specs field by field, nested fields as dotted
// paths (tls.cert), lists as one value: a line "  + path: value" for a
// field added, "  - path: value" for one removed, "    path: old → new"
// for one changed, in the order of the paths.
func specDiff(before, after []byte) ([]string, error) {
	old, err := flatSpec(before)
	if err != nil {
		return nil, err
	}
	cur, err := flatSpec(after)
	if err != nil {
		return nil, err
	}
	paths := slices.Sorted(maps.Keys(old))
	for p := range cur {
		if _, ok := old[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	var lines []string
	for _, p := range paths {
		o, inOld := old[p]
		c, inCur := cur[p]
		switch {
		case !inOld:
			lines = append(lines, fmt.Sprintf("  + %s: %s", p, c))
		case !inCur:
			lines = append(lines, fmt.Sprintf("  - %s: %s", p, o))
		case o != c:
			lines = append(lines, fmt.Sprintf("    %s: %s → %s", p, o, c))
		}
	}
	return lines, nil
}

// flatSpec maps each field of a spec, nested ones by dotted path, to its
// value as compact JSON.
func flatSpec(spec []byte) (map[string]string, error) {
	out := map[string]string{}
	if len(spec) == 0 {
		return out, nil
	}
	v, err := topology.DecodeSpec(spec)
	if err != nil {
		return nil, fmt.Errorf("read its spec: %w", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("its spec is not an object: %s", spec)
	}
	var walk func(prefix string, m map[string]any) error
	walk = func(prefix string, m map[string]any) error {
		for k, v := range m {
			path := prefix + k
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
				if err := walk(path+".", sub); err != nil {
					return err
				}
				continue
			}
			text, err := compactJSON(v)
			if err != nil {
				return err
			}
			out[path] = text
		}
		return nil
	}
	return out, walk("", m)
}

// compactJSON writes v as JSON on one line, leaving <, > and & as they are.
func compactJSON(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}
