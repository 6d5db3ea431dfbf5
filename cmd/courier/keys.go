package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/spf13/cobra"
)

// secretPrefix marks courier API key secrets, so that secret scanners and
// people recognise one that leaked.
const secretPrefix = "courier_"

func newKeysCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Make API keys, for the config file or in the store",
	}
	var role string
	var routes []string
	newCmd := &cobra.Command{
		Use:   "new NAME",
		Short: "Make a new API key: print its secret once and the line for the config file",
		Long: `Make a new API key. The secret is printed once and kept nowhere: give it to the
caller, who sends it as "Authorization: Bearer <secret>" (the courier command
line takes it from COURIER_API_KEY or --api-key). The config file holds only
its hash: paste the printed line under keys: and reload (SIGHUP) or restart.

Roles: sender (sends messages and reads its own), operator (reads all,
resubmits, discards, switches endpoints), admin (everything, reload included).`,
		Example: `  courier keys new erp --role sender --routes acme
  courier keys new ops --role operator`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if !courier.ValidName(name) {
				return fmt.Errorf("%q is not a valid key name: use 1 to %d letters, digits, '.', '_' or '-'", name, courier.MaxNameLen)
			}
			if !courier.Role(role).Valid() {
				return fmt.Errorf("--role must be sender, operator or admin, not %q", role)
			}
			if len(routes) > 0 && courier.Role(role) != courier.RoleSender {
				return fmt.Errorf("--routes limits sender keys only; %s keys reach every route", role)
			}
			secret, err := newSecret()
			if err != nil {
				return err
			}
			line := fmt.Sprintf("  %s: {role: %s, hash: %q", name, role, api.HashSecret(secret))
			if len(routes) > 0 {
				line += ", routes: [" + strings.Join(routes, ", ") + "]"
			}
			line += "}"
			fmt.Fprintf(g.stdout, "secret (shown only now; give it to the caller): %s\n\n", secret)
			fmt.Fprintf(g.stdout, "add to the config file under keys:\n\nkeys:\n%s\n", line)
			return nil
		},
	}
	newCmd.Flags().StringVar(&role, "role", "", "sender, operator or admin (required)")
	newCmd.Flags().StringSliceVar(&routes, "routes", nil, "limit a sender key to these routes")
	newCmd.MarkFlagRequired("role")
	cmd.AddCommand(newCmd, newKeysCreateCmd(g), newKeysListCmd(g), newKeysDeleteCmd(g))
	return cmd
}

// keySpec is a key's fields as the config file and the store have them.
type keySpec struct {
	Role         string   `json:"role"`
	Hash         string   `json:"hash"`
	Routes       []string `json:"routes,omitempty"`
	Rate         string   `json:"rate,omitempty"`
	MaxSuspended string   `json:"max_suspended,omitempty"`
}

func newKeysCreateCmd(g *globals) *cobra.Command {
	var spec keySpec
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Make a new API key in the server's store: print its secret once",
		Long: `Make a new API key and keep it in the server's store, where courier keeps its
keys when the config file has no keys: section (and the topology is in the
store too). The key works on every node at once; its secret is printed once
and kept nowhere, the store holds only its hash. Admin keys only; the first
key of a server must be an admin key, made from the server's own machine.`,
		Example: `  courier keys create root --role admin
  courier keys create erp --role sender --routes acme --rate 100/s`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			secret, err := newSecret()
			if err != nil {
				return err
			}
			spec.Hash = api.HashSecret(secret)
			body, err := json.Marshal(spec)
			if err != nil {
				return err
			}
			// 0: create only; an existing key of that name is not replaced.
			if _, _, err := g.client().PutObject(cmd.Context(), courier.KindKey, args[0], body, 0); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "key %s created\nsecret (shown only now; give it to the caller): %s\n", args[0], secret)
			return nil
		},
	}
	cmd.Flags().StringVar(&spec.Role, "role", "", "sender, operator or admin (required)")
	cmd.Flags().StringSliceVar(&spec.Routes, "routes", nil, "limit a sender key to these routes")
	cmd.Flags().StringVar(&spec.Rate, "rate", "", "limit the messages the key may send (100/s)")
	cmd.Flags().StringVar(&spec.MaxSuspended, "max-suspended", "", "refuse the key's messages while it has this many suspended (or unlimited)")
	cmd.MarkFlagRequired("role")
	return cmd
}

func newKeysListCmd(g *globals) *cobra.Command {
	return newListCmd(g, "List the API keys in the server's store", func(c *api.Client, ctx context.Context) ([]api.TopologyObject, error) {
		return c.Objects(ctx, courier.KindKey)
	}, func(objs []api.TopologyObject) []api.TopologyObject { return objs },
		[]string{"NAME", "ROLE", "ROUTES", "VERSION", "UPDATED BY"}, func(o api.TopologyObject) []string {
			var k keySpec
			_ = json.Unmarshal(o.Spec, &k)
			return []string{o.Name, k.Role, strings.Join(k.Routes, ","), fmt.Sprint(o.Version), o.UpdatedBy}
		})
}

func newKeysDeleteCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete an API key from the server's store; it stops working at once",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.client().DeleteObject(cmd.Context(), courier.KindKey, args[0], -1); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "key %s deleted\n", args[0])
			return nil
		},
	}
}

// newSecret returns 32 random bytes, URL-safe base64, after secretPrefix.
func newSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make a secret: %w", err)
	}
	return secretPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}
