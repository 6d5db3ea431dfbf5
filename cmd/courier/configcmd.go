package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/config"
	httptransport "github.com/courier-gw/courier/transport/http"
	"github.com/spf13/cobra"
)

func newConfigCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Work with configuration files",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "check FILE",
		Short: "Validate a configuration file: every error with its line, and a warning for each endpoint the SSRF guard refuses",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := config.Load(args[0])
			if err != nil {
				fmt.Fprintln(g.stderr, err)
				return exitError(1)
			}
			// The configuration names the listener's certificate and key;
			// serve loads them. Load them as it does, so that a pair that
			// would stop serve fails the check.
			if cfg.TLS.Cert != "" {
				if _, err := loadCertificate(cfg.TLS.Cert, cfg.TLS.Key); err != nil {
					fmt.Fprintf(g.stderr, "%s: tls: %v\n", args[0], err)
					return exitError(1)
				}
			}
			// An endpoint the SSRF guard would refuse is a warning, not an
			// error: on a server, the guard decides at each connection,
			// with the server's allowlist and what the name resolves to then.
			for _, name := range slices.Sorted(maps.Keys(cfg.Topology.Endpoints)) {
				ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Second)
				why := httptransport.Blocked(ctx, nil, cfg.Topology.Endpoints[name], cfg.Outbound.AllowNetworks)
				cancel()
				if why != "" {
					fmt.Fprintf(g.stderr, "warning: %s: endpoints.%s.url: %s (with this file's outbound.allow_networks)\n", args[0], name, why)
				}
			}
			// The objects the file writes: the topology has the built-in
			// default policy besides, which the file need not name.
			n := func(k courier.TopologyKind) int { return len(cfg.Specs[k]) }
			fmt.Fprintf(g.stdout, "%s is valid: %s, %s, %s, %s, %s\n", args[0],
				plural(n(courier.KindEndpoint), "endpoint"), plural(n(courier.KindRoute), "route"),
				plural(n(courier.KindPolicy), "policy"), plural(n(courier.KindSubscription), "subscription"),
				plural(len(cfg.Keys), "key"))
			return nil
		},
	})
	return cmd
}
