package main

import (
	"context"
	"fmt"

	"github.com/courier-gw/courier/api"
	httptransport "github.com/courier-gw/courier/transport/http"
	"github.com/spf13/cobra"
)

func newSigningKeysCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "signing-keys",
		Short: "Make, rotate and retire courier's keys that sign v1a webhook requests",
		Long: `courier signs the requests of http endpoints whose signature is v1a with its own
ed25519 keys; receivers verify them with the public keys served, to anyone, at
GET /v1/signing-keys. Every key there signs: to rotate, make a new key (the
requests then carry a signature of each), let receivers fetch the keys again,
then retire the old one.

With the topology in the store, the store keeps the keys (their private halves
sealed with secrets_key) and these commands change them, with an admin key of
the server. With the topology in the config file, the keys are its
signing_keys (or COURIER_SIGNING_KEYS): "new" prints one to add there.`,
	}
	list := newListCmd(g, "List the public halves of the signing keys, oldest first",
		(*api.Client).SigningKeys, func(set *api.SigningKeySet) []httptransport.PublicKey { return set.Keys }, keyHeader, keyRow)
	rotate := &cobra.Command{
		Use:   "rotate",
		Short: "Make a new signing key in the store; it signs beside the others until they are retired",
		Args:  cobra.NoArgs,
		RunE: askServer(g, func(ctx context.Context, c *api.Client, _ []string) (*api.RotatedKey, error) {
			return c.RotateSigningKey(ctx)
		}, func(out *api.RotatedKey) error {
			fmt.Fprintf(g.stdout, "signing key %s made; the keys that sign now:\n", out.Key.KeyID)
			return keyTable(g, out.Keys)
		}),
	}
	var retired string // the ID retire was given
	retire := &cobra.Command{
		Use:   "retire ID",
		Short: "Retire a signing key: it signs no more, and is no longer served",
		Args:  cobra.ExactArgs(1),
		RunE: askServer(g, func(ctx context.Context, c *api.Client, args []string) (*api.SigningKeySet, error) {
			retired = args[0]
			return c.RetireSigningKey(ctx, retired)
		}, func(set *api.SigningKeySet) error {
			fmt.Fprintf(g.stdout, "signing key %s retired; the keys that sign now:\n", retired)
			return keyTable(g, set.Keys)
		}),
	}
	newKey := &cobra.Command{
		Use:   "new",
		Short: "Print a new signing key for signing_keys in the config file (file mode)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := httptransport.NewSigningKey()
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "signing key %s (the private key, shown only now: keep it as a secret):\n%s\n\n", k.ID, k.Seed())
			fmt.Fprintf(g.stdout, "add it to signing_keys (space-separated, oldest first), e.g. through COURIER_SIGNING_KEYS.\n")
			return nil
		},
	}
	cmd.AddCommand(list, rotate, retire, newKey)
	return cmd
}

// keyTable prints the public halves of signing keys as a table.
func keyTable(g *globals, keys []httptransport.PublicKey) error {
	return tableOf(g, keyHeader, keys, keyRow)
}

// keyHeader and keyRow make the table of the public halves of signing
// keys.
var keyHeader = []string{"ID", "PUBLIC KEY"}

func keyRow(k httptransport.PublicKey) []string { return []string{k.KeyID, k.Webhooks} }
