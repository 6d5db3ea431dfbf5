package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"

	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/config"
	"github.com/spf13/cobra"
)

func newSecretsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secrets",
		Short: "The key that encrypts the topology's secrets in the store",
		Long: `Endpoint secrets and passwords of the topology held in the store are stored
encrypted with secrets_key (or COURIER_SECRETS_KEY): 32 random bytes in
standard base64, the same on every node. To change the key: make a new one;
on every node set secrets_key to it and secrets_old_key to the old one, and
restart the nodes one at a time; run 'courier secrets rotate' once; then
remove secrets_old_key and restart again.`,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "new-key",
		Short: "Print a new random key for secrets_key (COURIER_SECRETS_KEY)",
		Example: `  courier secrets new-key
  export COURIER_SECRETS_KEY=$(courier secrets new-key)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			key := make([]byte, config.SecretsKeySize)
			if _, err := rand.Read(key); err != nil {
				return fmt.Errorf("make a key: %w", err)
			}
			fmt.Fprintln(g.stdout, base64.StdEncoding.EncodeToString(key))
			return nil
		},
	}, &cobra.Command{
		Use:   "rotate",
		Short: "Encrypt every stored secret again under the server's current secrets_key",
		Long: `Has the server encrypt again, under its secrets_key, every stored secret that
another key encrypted (it reads them with secrets_old_key). Run it once, after
every node runs with the new secrets_key and the old one as secrets_old_key;
then secrets_old_key can go. Running it again finds nothing left to do.`,
		Example: `  courier secrets rotate`,
		Args:    cobra.NoArgs,
		RunE: askServer(g, func(ctx context.Context, c *api.Client, _ []string) (rotation, error) {
			n, err := c.RotateSecrets(ctx)
			return rotation{Rotated: n}, err
		}, func(r rotation) error {
			switch r.Rotated {
			case 0:
				fmt.Fprintln(g.stdout, "nothing to seal again: every stored secret is under the current key")
			case 1:
				fmt.Fprintln(g.stdout, "1 object sealed again under the current key")
			default:
				fmt.Fprintf(g.stdout, "%d objects sealed again under the current key\n", r.Rotated)
			}
			return nil
		}),
	})
	return cmd
}

// rotation is what secrets rotate did.
type rotation struct {
	Rotated int `json:"rotated"`
}
