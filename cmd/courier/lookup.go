package main

import (
	"context"
	"time"

	"github.com/courier-gw/courier/api"
	"github.com/spf13/cobra"
)

func newLookupCmd(g *globals) *cobra.Command {
	var route, typ string
	cmd := &cobra.Command{
		Use:   "lookup RECIPIENT --type T --route R",
		Short: "Show what courier resolves for a recipient on a lookup route, and why",
		Long: `Resolve a recipient as the next attempt of a message would: through the
server's cache, or by asking the registry. Shows the registry asked, whether
the answer was cached and until when, the resolved URL and certificate, and
the health of the resolved endpoint.`,
		Example: `  courier lookup 0088:5798000000001 --type invoice --route nemhandel`,
		Args:    cobra.ExactArgs(1),
		RunE: askServer(g, func(ctx context.Context, c *api.Client, args []string) (*api.LookupAnswer, error) {
			return c.Lookup(ctx, route, args[0], typ)
		}, func(a *api.LookupAnswer) error {
			field := g.fields(14)
			field("Route", a.Route)
			field("Recipient", a.Recipient)
			field("Type", a.Type)
			field("Registry", a.Registry)
			answer := "asked the registry now"
			if a.Cached {
				answer = "from the cache"
			}
			if !a.CachedUntil.IsZero() {
				answer += ", kept until " + a.CachedUntil.Local().Format(time.RFC3339)
			}
			field("Answer", answer)
			switch {
			case a.NotRegistered:
				field("Result", "not registered: messages to this recipient are suspended as rejected")
			case a.Error != "":
				field("Result", "the registry could not be asked; attempts are retried (class lookup)")
				field("Error", a.Error)
			default:
				field("URL", a.URL)
				field("Certificate", a.CertificateSHA256)
				if !a.ExpiresAt.IsZero() {
					field("Expires", a.ExpiresAt.Local().Format(time.RFC3339))
				}
				if e := a.Endpoint; e != nil {
					field("Endpoint", e.Name)
					field("State", string(e.State))
				}
			}
			if a.NotRegistered || a.Error != "" {
				return exitError(1)
			}
			return nil
		}),
	}
	cmd.Flags().StringVar(&route, "route", "", "the lookup route")
	cmd.Flags().StringVar(&typ, "type", "", "the message type (the registry's document type)")
	cmd.MarkFlagRequired("route")
	cmd.MarkFlagRequired("type")
	return cmd
}
