package main

import (
	"context"
	"fmt"

	"github.com/courier-gw/courier/api"
	"github.com/spf13/cobra"
)

// askServer returns the RunE of a command that asks the server one thing:
// after --output is checked, ask puts the question with the command's
// arguments, and the answer is printed as JSON with -o json, else by text.
func askServer[T any](g *globals, ask func(ctx context.Context, c *api.Client, args []string) (T, error), text func(T) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := g.check(); err != nil {
			return err
		}
		v, err := ask(cmd.Context(), g.client(), args)
		if err != nil {
			return err
		}
		if g.output == "json" {
			return g.printJSON(v)
		}
		return text(v)
	}
}

// newSwitchCmd returns the command `verb NAME` that switches what NAME
// names, a kind of thing such as an endpoint, on or off with flip, and
// prints the state it is in then.
func newSwitchCmd[T any](g *globals, verb, short, kind string, flip func(c *api.Client, ctx context.Context, name string) (T, error),
	state func(T) (name, state string)) *cobra.Command {
	return newNameCmd(g, verb+" NAME", short, flip, func(v T) error {
		name, st := state(v)
		fmt.Fprintf(g.stdout, "%s %s is %s\n", kind, name, st)
		return nil
	})
}

// newNameCmd returns the command use (`show NAME`) that asks the server
// about the one thing its argument names, as askAbout does.
func newNameCmd[T any](g *globals, use, short string, ask func(c *api.Client, ctx context.Context, name string) (T, error),
	text func(T) error) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Args: cobra.ExactArgs(1), RunE: askAbout(g, ask, text)}
}

// askAbout returns the RunE of a command `verb NAME` that asks the server
// about the one thing its argument names with ask, a method of the client
// such as (*api.Client).Endpoint, and prints the answer as askServer does.
func askAbout[T any](g *globals, ask func(c *api.Client, ctx context.Context, name string) (T, error), text func(T) error) func(*cobra.Command, []string) error {
	return askServer(g, func(ctx context.Context, c *api.Client, args []string) (T, error) {
		return ask(c, ctx, args[0])
	}, text)
}

// newListCmd returns the command `list` that asks the server for a list L
// with ask, a method of the client such as (*api.Client).Tenants, and
// prints it as JSON with -o json, else as a table: header, then a row of
// each of its items.
func newListCmd[L, T any](g *globals, short string, ask func(c *api.Client, ctx context.Context) (L, error), items func(L) []T,
	header []string, row func(T) []string) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: short,
		Args:  cobra.NoArgs,
		RunE: askServer(g, func(ctx context.Context, c *api.Client, _ []string) (L, error) {
			return ask(c, ctx)
		}, func(list L) error {
			return tableOf(g, header, items(list), row)
		}),
	}
}
