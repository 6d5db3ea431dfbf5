package amqp

import (
	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/check"
)

// Kind is the amqp transport as the configuration, the API and the server
// know it (package transport lists it).
var Kind = courier.NewTransportKind(courier.TransportAMQP, []string{"url", "exchange", "routing_key"}, decode, wire,
	func(o courier.SenderOptions) *Transport { return New(Options{Logger: o.Logger}) })

// Settings are an amqp endpoint's settings.
type Settings struct {
	URL        string
	Exchange   string
	RoutingKey string
}

// Of returns the amqp settings of e, giving e empty ones if it has none:
// for whoever makes an endpoint.
func Of(e *courier.Endpoint) *Settings { return courier.SettingsOf[Settings](e) }

// settingsOf returns the amqp settings of e, empty ones if it has none,
// without changing e.
func settingsOf(e *courier.Endpoint) *Settings { return courier.SettingsIn[Settings](e) }

// Target is the broker's URL.
func (s *Settings) Target() string { return s.URL }

// Redacted returns a copy with the URL's password and query values left
// out.
func (s *Settings) Redacted() courier.Settings {
	c := *s
	c.URL = courier.RedactURL(s.URL)
	return &c
}

func decode(f courier.SettingsFields) *Settings {
	a := &Settings{}
	if f.Required("url", ": amqp:// or amqps:// URL of the broker") {
		if l := f.String("url", &a.URL); l > 0 && check.URL(a.URL, "amqp", "amqps") != nil {
			f.ErrorAt(l, f.Field("url"), "must be an amqp:// or amqps:// URL")
		}
	}
	f.String("exchange", &a.Exchange)
	f.String("routing_key", &a.RoutingKey)
	if a.Exchange == "" && a.RoutingKey == "" && !f.Malformed() {
		f.Errorf("routing_key", "required with the default exchange: it routes by queue name")
	}
	return a
}

// Wire are an amqp endpoint's settings as the API shows them.
type Wire struct {
	URL        string `json:"url"`
	Exchange   string `json:"exchange"`
	RoutingKey string `json:"routing_key"`
}

func wire(a *Settings) Wire { return Wire{URL: a.URL, Exchange: a.Exchange, RoutingKey: a.RoutingKey} }
