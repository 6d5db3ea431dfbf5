package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/courier-gw/courier/api"
	"github.com/spf13/cobra"
)

func newTypesCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "types",
		Short: "The message types taken in, with their counts, policies and subscriptions",
		Long: `Every message type the server's store has taken in: how many messages of it
came (a published message counts once), when the last did, the policy that
retries it and the subscriptions that want it (those with a header filter,
only the messages with those headers).`,
		Args: cobra.NoArgs,
		RunE: askServer(g, func(ctx context.Context, c *api.Client, _ []string) (api.TypeList, error) {
			types, err := c.Types(ctx)
			return api.TypeList{Types: types}, err
		}, func(l api.TypeList) error {
			return tableOf(g, []string{"TYPE", "MESSAGES", "LAST", "POLICY", "SUBSCRIPTIONS"}, l.Types, func(t api.TypeView) []string {
				var subs []string
				for _, s := range t.Subscriptions {
					name := s.Name + " (to " + s.Route
					if len(s.Headers) > 0 {
						name += ", filtered"
					}
					subs = append(subs, name+")")
				}
				if len(subs) == 0 {
					subs = []string{"-"}
				}
				return []string{t.Type, fmt.Sprint(t.Count), ago(&t.LastSeen), t.Policy, strings.Join(subs, ", ")}
			})
		}),
	}
}
