package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/topology"
	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
)

// parseKind reads a kind of topology object as people write it: singular
// or plural (endpoint, endpoints).
func parseKind(s string) (courier.TopologyKind, error) {
	for _, k := range courier.TopologyKinds {
		if s == string(k) || s == k.Section() {
			return k, nil
		}
	}
	return "", fmt.Errorf("%q is not a kind of object: use endpoint, route, policy or subscription", s)
}

// kindAndName reads the arguments KIND NAME, or KIND/NAME as apply prints
// them; name is empty when only a kind is given.
func kindAndName(args []string) (kind, name string) {
	kind = args[0]
	if len(args) > 1 {
		return kind, args[1]
	}
	if k, n, ok := strings.Cut(kind, "/"); ok {
		return k, n
	}
	return kind, ""
}

// plainError is an API error whose message says all a person needs (the
// file that holds the topology, what uses an object): it is shown as the
// server words it, without its code.
type plainError struct{ err *courier.Error }

func (e plainError) Error() string { return e.err.Message }
func (e plainError) Unwrap() error { return e.err }

// plainConflict shows a conflict plainly, and other errors as they are.
func plainConflict(err error) error {
	var ce *courier.Error
	if errors.As(err, &ce) && ce.Code == courier.CodeConflict {
		return plainError{ce}
	}
	return err
}

func newGetCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "get endpoints|routes|policies|subscriptions|topology [NAME]",
		Short: "Print topology objects as the configuration file writes them, to export, edit and apply",
		Long: `Prints endpoints, routes, policies or subscriptions (or the whole topology)
in the configuration file's form: YAML by default, which 'courier apply -f'
takes back as it is, or JSON with -o json, which PUT /v1/topology takes.
Secrets are never shown: they appear as "set", which apply reads as "keep the
stored secret". Fields are in alphabetical order.`,
		Example: `  courier get topology > topology.yaml
  courier get endpoints
  courier get endpoint acme-primary
  courier get route/acme -o json`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			format := g.output
			if !cmd.Flags().Changed("output") {
				format = "yaml"
			}
			if format != "yaml" && format != "json" {
				return fmt.Errorf("get prints yaml or json, not %q", format)
			}
			what, name := kindAndName(args)
			kinds := courier.TopologyKinds
			if what == "topology" {
				if name != "" {
					return errors.New("get topology takes no name: it prints every object")
				}
			} else {
				k, err := parseKind(what)
				if err != nil {
					return err
				}
				kinds = []courier.TopologyKind{k}
			}
			t, err := g.client().Topology(cmd.Context())
			if err != nil {
				return err
			}
			out := api.Topology{Version: t.Version, File: t.File}
			for _, k := range kinds {
				objs := *t.Section(k)
				if name != "" {
					spec, ok := objs[name]
					if !ok {
						return courier.Errorf(courier.CodeNotFound, "no %s %q", k, name)
					}
					objs = map[string]json.RawMessage{name: spec}
				}
				if objs == nil {
					objs = map[string]json.RawMessage{}
				}
				*out.Section(k) = objs
			}
			if format == "json" {
				return g.printJSON(out)
			}
			return writeTopologyYAML(g.stdout, &out, kinds)
		},
	}
}

// writeTopologyYAML writes the sections of kinds of t as a configuration
// file holds them, under a comment with its version; an empty section is
// written as {}, so that the file still has it.
func writeTopologyYAML(w io.Writer, t *api.Topology, kinds []courier.TopologyKind) error {
	if t.File != "" {
		fmt.Fprintf(w, "# topology of the server's configuration file %s (change it there)\n", t.File)
	} else {
		fmt.Fprintf(w, "# topology version %d\n", t.Version)
	}
	for i, k := range kinds {
		objs := *t.Section(k)
		section := &yaml.Node{Kind: yaml.MappingNode}
		if len(objs) == 0 {
			section.Style = yaml.FlowStyle
		}
		for _, name := range slices.Sorted(maps.Keys(objs)) {
			v, err := topology.DecodeSpec(objs[name])
			if err != nil {
				return fmt.Errorf("%s %q: read its spec: %w", k, name, err)
			}
			section.Content = append(section.Content, stringNode(name), yamlValue(v))
		}
		if i > 0 {
			fmt.Fprintln(w)
		}
		doc := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{stringNode(k.Section()), section}}
		enc := yaml.NewEncoder(w)
		enc.SetIndent(2)
		if err := enc.Encode(doc); err != nil {
			return err
		}
		if err := enc.Close(); err != nil {
			return err
		}
	}
	return nil
}

// yamlValue turns a decoded JSON value into YAML: mapping keys sorted,
// strings that YAML would read as something else quoted, numbers with
// their text kept, lists of single values on one line.
func yamlValue(v any) *yaml.Node {
	switch v := v.(type) {
	case map[string]any:
		n := &yaml.Node{Kind: yaml.MappingNode}
		if len(v) == 0 {
			n.Style = yaml.FlowStyle
		}
		for _, k := range slices.Sorted(maps.Keys(v)) {
			n.Content = append(n.Content, stringNode(k), yamlValue(v[k]))
		}
		return n
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for _, it := range v {
			c := yamlValue(it)
			if c.Kind != yaml.ScalarNode || strings.Contains(c.Value, "\n") {
				n.Style = 0
			}
			n.Content = append(n.Content, c)
		}
		return n
	case string:
		return stringNode(v)
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(string(v), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: string(v)}
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: fmt.Sprint(v)}
	default: // null
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
	}
}

func stringNode(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

func newDeleteCmd(g *globals) *cobra.Command {
	var ifMatch int64
	cmd := &cobra.Command{
		Use:   "delete endpoint|route|policy|subscription NAME",
		Short: "Delete an endpoint, route, policy or subscription of the topology held in the store",
		Long: `Deletes one object of the topology held in the store. What something else
uses (an endpoint of a route, a route of a subscription) is not deleted: the
server says what uses it. With --if-match, the object is deleted only if it
is still at that version (its "version" in the API, its ETag), so that a
change made meanwhile by someone else is not lost.`,
		Example: `  courier delete route acme
  courier delete endpoint acme-backup --if-match 12`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.check(); err != nil {
				return err
			}
			what, name := kindAndName(args)
			kind, err := parseKind(what)
			if err != nil {
				return err
			}
			if name == "" {
				return fmt.Errorf("delete which %s? give its name", kind)
			}
			version := int64(-1)
			if cmd.Flags().Changed("if-match") {
				if ifMatch < 1 {
					return errors.New("--if-match takes the object's version, a number from 1")
				}
				version = ifMatch
			}
			if err := g.client().DeleteObject(cmd.Context(), kind, name, version); err != nil {
				return plainConflict(err)
			}
			if g.output == "json" {
				return g.printJSON(map[string]any{"kind": kind, "name": name, "deleted": true})
			}
			fmt.Fprintf(g.stdout, "%s/%s deleted\n", kind, name)
			return nil
		},
	}
	cmd.Flags().Int64Var(&ifMatch, "if-match", 0, "delete only if the object is at this version")
	return cmd
}
