package main

import (
	"crypto/rand"
	"encoding/base64"
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
		Short: "Make API keys",
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
	cmd.AddCommand(newCmd)
	return cmd
}

// newSecret returns 32 random bytes, URL-safe base64, after secretPrefix.
func newSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make a secret: %w", err)
	}
	return secretPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}
