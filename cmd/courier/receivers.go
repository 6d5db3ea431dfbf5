package main

import (
	"context"
	"fmt"
	"log/slog"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/config"
	"github.com/courier-gw/courier/receiver"
	amqptransport "github.com/courier-gw/courier/transport/amqp"
	filetransport "github.com/courier-gw/courier/transport/file"
	natstransport "github.com/courier-gw/courier/transport/nats"
	"github.com/spf13/cobra"
)

// openSource connects to a receive location's source, by its transport.
func openSource(ctx context.Context, r *courier.Receiver) (courier.Source, error) {
	switch r.Transport {
	case courier.ReceiveAMQP:
		return amqptransport.Open(ctx, r)
	case courier.ReceiveNATS:
		return natstransport.Open(ctx, r)
	case courier.ReceiveDir:
		return filetransport.OpenPickup(r)
	}
	return nil, fmt.Errorf("receiver %s: no source for transport %q", r.Name, r.Transport)
}

// newReceivers returns the service of the configured receive locations.
func newReceivers(cfg *config.Config, store courier.Store, topology func() *courier.Topology, clock courier.Clock, logger *slog.Logger, due func(routes []string),
	event func(courier.Event)) *receiver.Service {
	rs := make([]*courier.Receiver, 0, len(cfg.Receivers))
	for _, r := range cfg.Receivers {
		rs = append(rs, r)
	}
	return receiver.New(receiver.Options{Store: store, TopologyFunc: topology, Receivers: rs, OpenFunc: openSource,
		MaxPayload: cfg.MaxPayload, DueFunc: due, EventFunc: event, Logger: logger, Clock: clock})
}

func newReceiversCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "receivers",
		Aliases: []string{"receiver"},
		Short:   "Receive locations: what each takes in, and stopping and starting them",
	}
	cmd.AddCommand(newListCmd(g, "List the receive locations of the server's node", func(c *api.Client, ctx context.Context) (api.ReceiverList, error) {
		rs, err := c.Receivers(ctx)
		return api.ReceiverList{Receivers: rs}, err
	}, func(list api.ReceiverList) []courier.ReceiverStatus { return list.Receivers },
		[]string{"NAME", "TRANSPORT", "STATE", "SINCE", "RECEIVED", "INVALID", "PENDING", "SOURCE", "WHY"},
		func(r courier.ReceiverStatus) []string {
			pending := "-"
			if r.Pending >= 0 {
				pending = fmt.Sprint(r.Pending)
			}
			why := r.StopReason
			if why == "" {
				why = r.LastError
			}
			return []string{r.Name, string(r.Transport), r.State, ago(&r.Since), fmt.Sprint(r.Received), fmt.Sprint(r.Invalid),
				pending, short(r.Source, 40), short(why, 60)}
		}), newReceiverSwitchCmd(g, false), newReceiverSwitchCmd(g, true))
	return cmd
}

func newReceiverSwitchCmd(g *globals, start bool) *cobra.Command {
	return newSwitchCmd(g, map[bool]string{true: "start", false: "stop"}[start],
		map[bool]string{true: "Start a stopped receive location again (after fixing what stopped it)",
			false: "Stop a receive location: it reads nothing until started; items not yet stored go back to their source"}[start],
		"receiver", func(c *api.Client, ctx context.Context, name string) (*courier.ReceiverStatus, error) {
			return c.SwitchReceiver(ctx, name, start)
		}, func(st *courier.ReceiverStatus) (string, string) { return st.Name, st.State })
}
