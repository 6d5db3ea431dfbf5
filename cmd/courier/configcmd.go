package main

import (
	"fmt"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/config"
	"github.com/spf13/cobra"
)

func newConfigCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Work with configuration files",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "check FILE",
		Short: "Validate a configuration file and report every error with its line",
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
