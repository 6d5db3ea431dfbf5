package main

import (
	"fmt"

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
			fmt.Fprintf(g.stdout, "%s is valid: %d endpoints, %d routes, %d policies, %d keys\n", args[0],
				len(cfg.Topology.Endpoints), len(cfg.Topology.Routes), len(cfg.Topology.Policies), len(cfg.Keys))
			return nil
		},
	})
	return cmd
}
