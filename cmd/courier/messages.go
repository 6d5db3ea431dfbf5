package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/spf13/cobra"
)

func newMessagesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "messages",
		Aliases: []string{"message", "msg"},
		Short:   "List, show, resubmit, discard and erase messages",
	}
	cmd.AddCommand(newMessagesListCmd(g), newMessagesShowCmd(g), newMessagesAttemptsCmd(g),
		newMessagesResubmitCmd(g), newMessagesDiscardCmd(g), newMessagesResendCmd(g), newMessagesPayloadCmd(g),
		newMessagesEraseCmd(g))
	return cmd
}

func newMessagesPayloadCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "payload ID",
		Short: "Write a message's payload, as it was given, to standard output",
		Long: `Write a message's payload to standard output, streamed as it comes: the way
to get a payload over 1 MiB, which show does not print.`,
		Example: `  courier messages payload catalogue-2026 > catalogue.xml`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.check(); err != nil {
				return err
			}
			body, _, err := g.client().Payload(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer body.Close()
			_, err = io.Copy(g.stdout, body)
			return err
		},
	}
}

func newMessagesListCmd(g *globals) *cobra.Command {
	var f courier.MessageFilter
	var state, reason string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List messages, newest first",
		Example: `  courier messages list --state suspended
  courier messages list --route acme --limit 20 -o json`,
		Args: cobra.NoArgs,
		RunE: askServer(g, func(ctx context.Context, c *api.Client, _ []string) (*api.MessageList, error) {
			f.State, f.Reason = courier.State(state), courier.Reason(reason)
			return c.Messages(ctx, f)
		}, g.messageTable),
	}
	fl := cmd.Flags()
	fl.StringVar(&state, "state", "", courier.OneOf(courier.States))
	fl.StringVar(&f.Type, "type", "", "message type")
	fl.StringVar(&f.Route, "route", "", "route")
	fl.StringVar(&f.Endpoint, "endpoint", "", "endpoint of the latest attempt")
	fl.StringVar(&f.Subscription, "subscription", "", "deliveries of published messages to this subscription")
	fl.StringVar(&reason, "reason", "", "suspension reason")
	fl.StringVar(&f.IDPrefix, "id-prefix", "", "ids that begin with this text (exactly: case-sensitive, no wildcards)")
	fl.IntVar(&f.Limit, "limit", 50, "messages per page (at most 1000)")
	fl.StringVar(&f.Cursor, "cursor", "", "continue a listing")
	return cmd
}

func newMessagesShowCmd(g *globals) *cobra.Command {
	return newNameCmd(g, "show ID[/SUBSCRIPTION]",
		"Show one message (a published one with its deliveries), or one delivery, with its payload and attempts",
		func(c *api.Client, ctx context.Context, id string) (messageHistory, error) {
			m, err := c.Message(ctx, id)
			if err != nil {
				return messageHistory{}, err
			}
			attempts, err := c.Attempts(ctx, id)
			return messageHistory{*m, attempts}, err
		}, func(mh messageHistory) error {
			m, attempts := &mh.Message, mh.History
			field := g.fields(16, "-")
			field("ID", m.ID)
			field("Subscription", m.Subscription)
			field("Type", m.Type)
			field("Route", m.Route)
			field("Recipient", m.Recipient)
			state := string(m.State)
			if m.Held != nil {
				state += ", held"
			}
			field("State", state)
			field("Reason", string(m.Reason))
			if m.Held != nil {
				field("Held", heldText(m.Held))
			}
			field("Attempts", attemptsText(m.Attempts, m.AttemptsTotal, m.ResubmitCount))
			switch {
			case m.Held != nil:
				field("Next attempt", "when "+m.Held.Endpoint+" takes attempts again")
			case m.NextAttemptAt != nil && (m.State == courier.StateQueued || m.State == courier.StateInflight):
				field("Next attempt", m.NextAttemptAt.Local().Format(time.RFC3339)+" ("+ago(m.NextAttemptAt)+")")
			}
			field("Endpoint", m.Endpoint)
			field("Last error", m.LastError)
			field("Priority", fmt.Sprint(m.Priority))
			field("Ordering key", m.OrderingKey)
			if m.Sequence > 0 {
				field("Sequence", fmt.Sprintf("%d on route %s", m.Sequence, m.Route))
				prev := m.PreviousID
				if prev == "" {
					prev = "none: it is the first of its key"
				}
				field("Previous id", prev)
			}
			switch m.Ordering {
			case api.OrderingWaiting:
				why := "an earlier message of its key"
				if h := m.WaitingFor; h != nil {
					why = h.ID + " (" + string(h.State)
					if h.Reason != "" {
						why += ": " + string(h.Reason)
					}
					why += ")"
					if h.LastError != "" {
						why += ", " + h.LastError
					}
				}
				field("Waiting for", why)
			case api.OrderingHoldsKey:
				field("Holds its key", "the later messages of "+m.OrderingKey+" wait until this one is resubmitted or discarded")
			case api.OrderingSkipped:
				field("Out of order", "it left the order of "+m.OrderingKey+"; the messages behind it went on")
			}
			field("Created", m.CreatedAt.Local().Format(time.RFC3339))
			field("Updated", m.UpdatedAt.Local().Format(time.RFC3339))
			if m.FinishedAt != nil {
				field("Finished", m.FinishedAt.Local().Format(time.RFC3339))
			}
			if m.ExpiresAt != nil {
				field("Expires", m.ExpiresAt.Local().Format(time.RFC3339))
			}
			for k, v := range m.Headers {
				field("Header", k+": "+v)
			}
			field("Content type", m.ContentType)
			field("Size", plural(m.Size, "byte"))
			if m.Erased != nil {
				field("Erased", erasedText(m.Erased))
			}
			for _, a := range m.Actions {
				field("Action", strings.TrimSpace(fmt.Sprintf("%s %s by %s %s", a.At.Local().Format(time.RFC3339), a.Kind, a.Who, a.Detail)))
			}
			if m.Workflow != nil {
				if err := printWorkflow(g, m); err != nil {
					return err
				}
			}
			if len(m.Deliveries) > 0 {
				fmt.Fprintln(g.stdout)
				if err := tableOf(g, deliveryHeader, m.Deliveries, deliveryRow); err != nil {
					return err
				}
			}
			fmt.Fprintf(g.stdout, "\n%s\n", preview(m, 2048))
			if len(attempts) > 0 {
				fmt.Fprintln(g.stdout)
				return printAttempts(g, attempts)
			}
			return nil
		})
}

// attemptsText says how many attempts a message had: in all, as its
// history lists them, and in the current round when a resubmit or resend
// began a new one.
func attemptsText(round int, total *int, resubmits int) string {
	if total == nil {
		return fmt.Sprint(round)
	}
	text := fmt.Sprint(*total)
	if resubmits > 0 {
		again := "once"
		if resubmits > 1 {
			again = fmt.Sprintf("%d times", resubmits)
		}
		text += fmt.Sprintf(" in all, %d since it was resubmitted or resent (%s)", round, again)
	}
	return text
}

// heldText says what holds a queued message, and why.
func heldText(h *api.Hold) string {
	text := "by endpoint " + h.Endpoint
	switch {
	case h.State == courier.HealthOff:
		text += ", switched off"
		if h.By != "" {
			text += " by " + h.By
		}
		if h.Since != nil {
			if since := ago(h.Since); since == "now" {
				text += " just now"
			} else {
				text += " " + since
			}
		}
	case h.Until != nil && time.Until(*h.Until) > 0:
		text += ", suspended until " + h.Until.Local().Format(time.RFC3339) + " (" + ago(h.Until) + ")"
	default:
		text += ", suspended: its probe attempt is due"
	}
	if len(h.Also) > 0 {
		text += "; also by " + strings.Join(h.Also, ", ")
	}
	return text
}

// nextAttempt is when a listed message's next attempt is due, or what
// holds it.
func nextAttempt(next *time.Time, held *api.Hold) string {
	if held != nil {
		return "held by " + held.Endpoint
	}
	return ago(next)
}

// messageHistory is a message with its attempts, as messages show prints it
// with -o json.
type messageHistory struct {
	api.Message
	History []api.Attempt `json:"history"`
}

// printWorkflow prints where a message of a workflow route stands, and
// each of its steps.
func printWorkflow(g *globals, m *api.Message) error {
	w := m.Workflow
	fmt.Fprintf(g.stdout, "\nWorkflow: %s, %s\n", w.Route, m.WorkflowStands())
	if len(w.StepsDetail) == 0 {
		return nil
	}
	return tableOf(g, []string{"  STEP", "ENDPOINT", "COMPENSATE", "STATE", "RESPONSE"}, w.StepsDetail, func(s api.StepView) []string {
		return []string{"  " + fmt.Sprint(s.N), s.Endpoint, short(s.Compensate, 40), string(s.State), short(s.ResponseText(), 60)}
	})
}

// preview renders the start of a payload for a terminal.
func preview(m *api.Message, limit int) string {
	var text string
	switch {
	case m.Erased != nil:
		return "(payload erased " + erasedText(m.Erased) + ")"
	case m.PayloadURL != "":
		return fmt.Sprintf("(%d bytes, SHA-256 %s: too large to show; courier messages payload %s > FILE)", m.Size, m.PayloadSHA256, m.ID)
	case m.Payload != nil:
		// Indented from its own bytes, not decoded and encoded again: the
		// keys keep their order and the strings their characters.
		var b bytes.Buffer
		if json.Indent(&b, m.Payload, "", "  ") == nil {
			text = b.String()
		} else {
			text = string(m.Payload)
		}
	default:
		raw, err := base64.StdEncoding.DecodeString(m.PayloadBase64)
		if err != nil {
			return "(payload cannot be shown)"
		}
		if !isPrintable(raw) {
			return fmt.Sprintf("(%d bytes of binary data)", len(raw))
		}
		text = string(raw)
	}
	if len(text) > limit {
		text = text[:limit] + fmt.Sprintf("\n… (%d more bytes)", len(text)-limit)
	}
	return text
}

func isPrintable(b []byte) bool {
	for _, r := range string(b) {
		if r == '\uFFFD' || (r < 0x20 && !strings.ContainsRune("\t\r\n", r)) {
			return false
		}
	}
	return true
}

func newMessagesAttemptsCmd(g *globals) *cobra.Command {
	return newNameCmd(g, "attempts ID[/SUBSCRIPTION]", "List every delivery attempt of a message",
		func(c *api.Client, ctx context.Context, id string) (api.AttemptList, error) {
			attempts, err := c.Attempts(ctx, id)
			return api.AttemptList{Attempts: attempts}, err
		}, func(list api.AttemptList) error { return printAttempts(g, list.Attempts) })
}

// printAttempts prints attempts as a table, with the route of each where
// they were not all on one configured route: a workflow's attempts say
// which step (or compensation) they belonged to.
func printAttempts(g *globals, attempts []api.Attempt) error {
	withRoute := false
	for _, a := range attempts {
		// Implicit routes (a workflow's steps) have a colon in their names.
		withRoute = withRoute || a.Route != attempts[0].Route || strings.Contains(a.Route, ":")
	}
	withSub := slices.ContainsFunc(attempts, func(a api.Attempt) bool { return a.Subscription != "" })
	header := []string{"N", "STARTED", "ENDPOINT", "OUTCOME", "CLASS", "STATUS", "MS", "ERROR"}
	if withRoute {
		header = slices.Insert(header, 2, "ROUTE")
	}
	if withSub {
		header = slices.Insert(header, 0, "SUBSCRIPTION")
	}
	return tableOf(g, header, attempts, func(a api.Attempt) []string {
		status := "-"
		if a.Status != 0 {
			status = fmt.Sprint(a.Status)
		}
		row := []string{fmt.Sprint(a.N), a.StartedAt.Local().Format("2006-01-02 15:04:05"), a.Endpoint,
			string(a.Outcome), short(string(a.Class), 20), status, fmt.Sprintf("%.1f", a.DurationMS), short(a.Error, 50)}
		if withRoute {
			row = slices.Insert(row, 2, a.Route)
		}
		if withSub {
			row = slices.Insert(row, 0, a.Subscription)
		}
		return row
	})
}

var deliveryHeader = []string{"SUBSCRIPTION", "ROUTE", "STATE", "REASON", "ATTEMPTS", "NEXT ATTEMPT", "LAST ERROR"}

// deliveryRow is one delivery of a published message, in its table.
func deliveryRow(d api.Delivery) []string {
	reason := string(d.Reason)
	if reason == "" {
		reason = "-"
	}
	attempts := d.Attempts
	if d.AttemptsTotal != nil {
		attempts = *d.AttemptsTotal // as the attempts below list them
	}
	return []string{d.Subscription, d.Route, string(d.State), reason, fmt.Sprint(attempts), nextAttempt(d.NextAttemptAt, d.Held), short(d.LastError, 40)}
}

func newMessagesResubmitCmd(g *globals) *cobra.Command {
	var route string
	cmd := newNameCmd(g, "resubmit ID[/SUBSCRIPTION]", "Put a suspended message back in the queue",
		func(c *api.Client, ctx context.Context, id string) (*api.Message, error) {
			return c.Resubmit(ctx, id, route)
		}, func(m *api.Message) error {
			fmt.Fprintf(g.stdout, "resubmitted %s to route %s (%s)\n", courier.DeliveryKey(m.ID, m.Subscription), m.Route, m.State)
			return nil
		})
	cmd.Flags().StringVar(&route, "route", "", "deliver to this route instead")
	return cmd
}

func newMessagesResendCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "resend ID[/SUBSCRIPTION]",
		Short: "Deliver a delivered (or discarded) message again, in a new round",
		Long: `Delivers a delivered (or discarded) message, or one delivery of a published
message, again, in a new round of attempts. The receiver gets the same
webhook-id as before (the delivery's id), so a receiver that deduplicates
on it takes the resend for a repeat.`,
		Args: cobra.ExactArgs(1),
		RunE: askAbout(g, (*api.Client).Resend, func(m *api.Message) error {
			fmt.Fprintf(g.stdout, "resent %s on route %s (%s)\n", courier.DeliveryKey(m.ID, m.Subscription), m.Route, m.State)
			return nil
		}),
	}
}

func newMessagesDiscardCmd(g *globals) *cobra.Command {
	return newNameCmd(g, "discard ID[/SUBSCRIPTION]", "Give up a queued or suspended message", (*api.Client).Discard, func(m *api.Message) error {
		fmt.Fprintf(g.stdout, "discarded %s\n", courier.DeliveryKey(m.ID, m.Subscription))
		return nil
	})
}

// erasedText says when, by whom and why a message's payload was erased.
func erasedText(e *api.Erased) string {
	text := e.At.Local().Format(time.RFC3339) + " by " + e.By
	if e.Reason != "" {
		text += ": " + e.Reason
	}
	return text
}

func newMessagesEraseCmd(g *globals) *cobra.Command {
	var reason string
	var yes bool
	cmd := &cobra.Command{
		Use:   "erase ID",
		Short: "Erase a message's payload for good, keeping a tombstone (a data-protection request)",
		Long: `Erases the payload of a message (of every delivery of a published one, which
share it) for good, before retention would: the message keeps its id, type,
route, states, attempts, size and history, and shows when, by whom and why
its payload was erased. A delivery still queued, in flight or suspended is
discarded with it. It cannot be undone, so it asks for --yes.`,
		Example: `  courier messages erase inv-2026-000123 --reason "GDPR request 118" --yes`,
		Args:    cobra.ExactArgs(1),
		RunE: askServer(g, func(ctx context.Context, c *api.Client, args []string) (*api.Message, error) {
			if !yes {
				return nil, fmt.Errorf("erasing the payload of message %s cannot be undone: run again with --yes to erase it", args[0])
			}
			return c.Erase(ctx, args[0], reason)
		}, func(m *api.Message) error {
			fmt.Fprintf(g.stdout, "erased the payload of %s (%s); erased %s\n", m.ID, m.State, erasedText(m.Erased))
			return nil
		}),
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (a data-protection request's reference, say); kept with the tombstone and in the audit log")
	cmd.Flags().BoolVar(&yes, "yes", false, "erase: the payload cannot be brought back")
	return cmd
}
