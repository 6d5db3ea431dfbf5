package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"os"
	"path/filepath"
	"strings"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

func newSendCmd(g *globals) *cobra.Command {
	var (
		req          api.IngestRequest
		headers      []string
		priority     int
		deliverAfter string
		expiresAt    string
	)
	cmd := &cobra.Command{
		Use:   "send [FILE]",
		Short: "Send one message, from a file or standard input",
		Long: `Send one message to courier. The payload is the file's content, or standard
input when no file (or "-") is given. A payload that is JSON, without another
--content-type, is sent as JSON; anything else is sent as bytes with its
content type (from --content-type or the file's extension).

Without --route the message is published: each subscription that wants its
type gets a delivery of it, on the subscription's route.

A JSON payload is sent as its bytes, as they are (not encoded anew), so the
receiver gets what was given. A file over 1 MiB is streamed as it is read,
never whole in memory (up to the server's max_payload, at most 1 GiB); it
gets an id when none is given.

With --id the send is idempotent: sending the same id and content again is
answered "exists"; the same id with other content is refused.`,
		Example: `  courier send invoice.xml --type invoice --route acme --id inv-2026-000123
  echo '{"order": 42}' | courier send --type order.created --route shop
  echo '{"order": 42}' | courier send --type order.cancelled
  courier send invoice.xml --type invoice --route nemhandel --recipient 0088:5798000000001`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.check(); err != nil {
				return err
			}
			name := "-"
			if len(args) == 1 {
				name = args[0]
			}
			var data []byte
			var err error
			var large *os.File // a file over courier.InlineMax, sent streamed
			if name != "-" {
				if large, err = openLarge(name); err != nil {
					return err
				}
			}
			if large != nil {
				defer large.Close()
			} else if name == "-" {
				data, err = io.ReadAll(cmd.InOrStdin())
			} else {
				data, err = os.ReadFile(name)
			}
			if err != nil {
				return fmt.Errorf("read payload: %w", err)
			}
			if req.ContentType == "" && name != "-" {
				req.ContentType = mime.TypeByExtension(filepath.Ext(name))
			}
			if large != nil {
				// Streamed as the body itself; the content type is the
				// file's, or bytes.
			} else {
				if req.ContentType == "" && json.Valid(data) {
					// Sent as bytes, so that the JSON arrives as it was
					// written: as the request's payload field it would be
					// compacted and its <, > and & escaped.
					req.ContentType = "application/json"
				}
				enc := base64.StdEncoding.EncodeToString(data)
				req.PayloadBase64 = &enc
			}
			if len(headers) > 0 {
				req.Headers = map[string]string{}
				for _, h := range headers {
					k, v, ok := strings.Cut(h, "=")
					if !ok {
						return fmt.Errorf("--header %q: want NAME=VALUE", h)
					}
					req.Headers[k] = v
				}
			}
			if cmd.Flags().Changed("priority") {
				req.Priority = &priority
			}
			for _, tf := range []struct {
				flag, value string
				dst         **time.Time
			}{{"--deliver-after", deliverAfter, &req.DeliverAfter}, {"--expires-at", expiresAt, &req.ExpiresAt}} {
				if tf.value == "" {
					continue
				}
				t, err := parseWhen(tf.value)
				if err != nil {
					return fmt.Errorf("%s: %w", tf.flag, err)
				}
				*tf.dst = &t
			}
			var m *api.Message
			var created bool
			if large != nil {
				if req.ID == "" {
					id, err := uuid.NewV7()
					if err != nil {
						return err
					}
					req.ID = id.String()
				}
				// err is the one of the command, not one of this block:
				// the ingest's error must reach the check below.
				var info os.FileInfo
				if info, err = large.Stat(); err != nil {
					return err
				}
				m, created, err = g.client().IngestRaw(cmd.Context(), req, large, info.Size())
			} else {
				m, created, err = g.client().Ingest(cmd.Context(), req)
			}
			if err != nil {
				return err
			}
			if g.output == "json" {
				return g.printJSON(m)
			}
			verb := "created"
			if !created {
				verb = "exists"
			}
			fmt.Fprintf(g.stdout, "%s %s (type %s, %s, %s)\n", verb, m.ID, m.Type, destination(m), m.State)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Type, "type", "", "message type (required), e.g. invoice")
	f.StringVar(&req.Route, "route", "", "route to deliver to (default: none, the message is published to the subscriptions of its type)")
	f.StringVar(&req.ID, "id", "", "message id (default: one is assigned)")
	f.StringVar(&req.ContentType, "content-type", "", "content type (default: from the file name, else JSON or bytes)")
	f.StringArrayVarP(&headers, "header", "H", nil, "header for the receiver, NAME=VALUE (repeatable)")
	f.StringVar(&req.OrderingKey, "ordering-key", "", "deliver in order with other messages of this key")
	f.StringVar(&req.Recipient, "recipient", "", "who the message is for (required on a route that looks up its endpoint), e.g. 0088:5798000000001")
	f.IntVar(&priority, "priority", 0, "priority 0-9 (default: the type's policy)")
	f.StringVar(&deliverAfter, "deliver-after", "", "hold until this time (RFC 3339) or for this long (e.g. 10m)")
	f.StringVar(&expiresAt, "expires-at", "", "give up after this time (RFC 3339) or after this long (e.g. 24h)")
	cmd.MarkFlagRequired("type")
	return cmd
}

// destination says where a message goes: its route, or the subscriptions
// of a published one.
func destination(m *api.Message) string {
	if m.Route != "" {
		return "route " + m.Route
	}
	subs := make([]string, len(m.Deliveries))
	for i, d := range m.Deliveries {
		subs[i] = d.Subscription
	}
	return fmt.Sprintf("published to %s: %s", plural(len(subs), "subscription"), strings.Join(subs, ", "))
}

// openLarge opens the payload file when it is larger than courier.InlineMax,
// to be sent streamed rather than read into memory; nil for a smaller one.
func openLarge(name string) (*os.File, error) {
	info, err := os.Stat(name)
	if err != nil {
		return nil, fmt.Errorf("read payload: %w", err)
	}
	if info.Size() <= courier.InlineMax {
		return nil, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("read payload: %w", err)
	}
	return f, nil
}

// isJSONType reports whether a content type (or none) means JSON.
func isJSONType(ct string) bool {
	if ct == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// parseWhen reads an RFC 3339 time or a duration from now.
func parseWhen(s string) (time.Time, error) { return parseTime(s, 1) }

// parseAgo reads an RFC 3339 time or a duration meaning that long ago.
func parseAgo(s string) (time.Time, error) { return parseTime(s, -1) }

// parseTime reads an RFC 3339 time, or a duration from now into the future
// (sign 1) or the past (sign -1).
func parseTime(s string, sign time.Duration) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%q is a negative duration: give how long, as 24h", s)
		}
		return time.Now().Add(sign * d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time (2026-11-24T00:00:00Z) nor a duration (24h)", s)
	}
	return t, nil
}

// agoFlag is the value of a flag that takes a time, as an RFC 3339 time or
// a duration meaning that long ago (24h): every --since and --until of the
// command line is one, so that each takes both forms.
type agoFlag struct{ t time.Time }

func (f *agoFlag) Set(s string) error {
	t, err := parseAgo(s)
	if err != nil {
		return err
	}
	f.t = t
	return nil
}

func (f *agoFlag) String() string {
	if f.t.IsZero() {
		return ""
	}
	return f.t.Format(time.RFC3339)
}

func (f *agoFlag) Type() string { return "time" }

// ptr returns the time given, or nil for none.
func (f *agoFlag) ptr() *time.Time {
	if f.t.IsZero() {
		return nil
	}
	t := f.t
	return &t
}

// sinceUsage and untilUsage are the help of --since and --until.
const (
	sinceUsage = "from this time on: RFC 3339 (2026-11-24T00:00:00Z) or a duration meaning that long ago (24h)"
	untilUsage = "before this time: RFC 3339 (2026-11-24T00:00:00Z) or a duration meaning that long ago (1h)"
)
