// Command courier is the durable delivery gateway: `courier serve` runs it,
// the other subcommands talk to a running server.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	courier "github.com/courier-gw/courier"
	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

func main() {
	if err := newRootCmd(os.Stdout, os.Stderr).Execute(); err != nil {
		var exit exitError
		if errors.As(err, &exit) {
			os.Exit(int(exit)) // already reported
		}
		fmt.Fprintln(os.Stderr, "courier:", describe(err))
		os.Exit(1)
	}
}

// exitError carries an exit status for failures already reported.
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// describe formats an error for a person: API errors show their code.
func describe(err error) string {
	var pe plainError
	if errors.As(err, &pe) {
		return pe.Error()
	}
	var ce *courier.Error
	if errors.As(err, &ce) {
		if ce.Code == courier.CodeUnavailable && ce.Err != nil {
			return fmt.Sprintf("%s: %v", ce.Message, ce.Err)
		}
		if ce.Code == courier.CodeUnauthenticated {
			return fmt.Sprintf("%s (%s): give the key's secret in COURIER_API_KEY or with --api-key", ce.Message, ce.Code)
		}
		return fmt.Sprintf("%s (%s)", ce.Message, ce.Code)
	}
	return err.Error()
}

// globals are the flags every client command shares.
type globals struct {
	server string
	apiKey string
	tenant string
	output string
	stdout io.Writer
	stderr io.Writer
}

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:           "courier",
		Short:         "courier is a durable delivery gateway",
		Long:          "courier takes messages over HTTP, stores each durably before it answers, and delivers it\nto its route's endpoints with retries, health rules and a suspended queue.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	defServer := os.Getenv("COURIER_SERVER")
	if defServer == "" {
		defServer = "127.0.0.1:8425"
	}
	root.PersistentFlags().StringVar(&g.server, "server", defServer, "courier server to talk to (env COURIER_SERVER)")
	root.PersistentFlags().StringVar(&g.tenant, "tenant", "", "act in this tenant (a system key's choice; a tenant's key acts in its own)")
	root.PersistentFlags().StringVar(&g.apiKey, "api-key", "", "API key secret sent as a bearer token (env COURIER_API_KEY, which keeps it out of the process list)")
	root.PersistentFlags().StringVarP(&g.output, "output", "o", "table", "output format: table or json (get: yaml or json)")
	root.AddCommand(
		newServeCmd(g),
		newSendCmd(g),
		newMessagesCmd(g),
		newSuspendedCmd(g),
		newEndpointsCmd(g),
		newStatsCmd(g),
		newTypesCmd(g),
		newSubscriptionsCmd(g),
		newReceiversCmd(g),
		newTenantsCmd(g),
		newLookupCmd(g),
		newConfigCmd(g),
		newKeysCmd(g),
		newSigningKeysCmd(g),
		newApplyCmd(g),
		newGetCmd(g),
		newDeleteCmd(g),
		newAuditCmd(g),
		newSecretsCmd(g),
		newBenchCmd(g),
		&cobra.Command{
			Use:   "version",
			Short: "Print the version",
			Args:  cobra.NoArgs,
			Run: func(cmd *cobra.Command, args []string) {
				fmt.Fprintln(g.stdout, "courier", versionString())
			},
		},
	)
	return root
}

func versionString() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "dev"
}
