package nats

import (
	"strings"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/check"
)

// Kind is the nats transport as the configuration, the API and the server
// know it (package transport lists it).
var Kind = courier.NewTransportKind(courier.TransportNATS, []string{"url", "subject"}, decode, wire,
	func(o courier.SenderOptions) *Transport { return New(Options{Logger: o.Logger}) })

// Settings are a nats endpoint's settings.
type Settings struct {
	URL     string
	Subject string
}

// Of returns the nats settings of e, giving e empty ones if it has none:
// for whoever makes an endpoint.
func Of(e *courier.Endpoint) *Settings { return courier.SettingsOf[Settings](e) }

// settingsOf returns the nats settings of e, empty ones if it has none,
// without changing e.
func settingsOf(e *courier.Endpoint) *Settings { return courier.SettingsIn[Settings](e) }

// Target is the server's URL (several separated by commas).
func (s *Settings) Target() string { return s.URL }

// Redacted returns a copy with the URLs' passwords, tokens and query
// values left out.
func (s *Settings) Redacted() courier.Settings {
	c := *s
	c.URL = courier.RedactURL(s.URL)
	return &c
}

func decode(f courier.SettingsFields) *Settings {
	n := &Settings{}
	if f.Required("url", ": nats:// or tls:// URL of the server") {
		if l := f.String("url", &n.URL); l > 0 {
			// The NATS client takes a comma-separated list of servers.
			for _, u := range strings.Split(n.URL, ",") {
				if check.URL(strings.TrimSpace(u), "nats", "tls") != nil {
					f.ErrorAt(l, f.Field("url"), "must be a nats:// or tls:// URL (several separated by commas)")
					break
				}
			}
		}
	}
	if f.Required("subject", ": the subject to publish on") {
		if l := f.String("subject", &n.Subject); l > 0 && !validSubject(n.Subject) {
			f.ErrorAt(l, f.Field("subject"), "%q is not a subject to publish on: dot-separated tokens without spaces or the wildcards * and >", check.Clip(n.Subject))
		}
	}
	return n
}

func validSubject(s string) bool {
	for _, tok := range strings.Split(s, ".") {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsAny(tok, " \t\r\n") {
			return false
		}
	}
	return true
}

// Wire are a nats endpoint's settings as the API shows them.
type Wire struct {
	URL     string `json:"url"`
	Subject string `json:"subject"`
}

func wire(n *Settings) Wire { return Wire{URL: n.URL, Subject: n.Subject} }
