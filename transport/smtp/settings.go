package smtp

import (
	"net/mail"
	"slices"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/check"
)

// Kind is the smtp transport as the configuration, the API and the server
// know it (package transport lists it).
var Kind = courier.NewTransportKind(courier.TransportSMTP,
	[]string{"addr", "from", "to", "username", "password", "starttls"}, decode, wire,
	func(o courier.SenderOptions) *Transport {
		return New(Options{Logger: o.Logger, PublicURL: o.PublicURL})
	})

// Settings are an smtp endpoint's settings.
type Settings struct {
	Addr     string
	From     string
	To       []string
	Username string
	Password string
	StartTLS string // "auto" (when offered), "always" or "never"
}

// Of returns the smtp settings of e, giving e empty ones if it has none:
// for whoever makes an endpoint.
func Of(e *courier.Endpoint) *Settings { return courier.SettingsOf[Settings](e) }

// settingsOf returns the smtp settings of e, empty ones if it has none,
// without changing e.
func settingsOf(e *courier.Endpoint) *Settings { return courier.SettingsIn[Settings](e) }

// Target is smtp://addr.
func (s *Settings) Target() string { return "smtp://" + s.Addr }

// Redacted returns a copy without the password.
func (s *Settings) Redacted() courier.Settings {
	c := *s
	if s.Password != "" {
		c.Password = courier.Redacted
	}
	return &c
}

func decode(f courier.SettingsFields) *Settings {
	s := &Settings{StartTLS: "auto"}
	if f.Required("addr", ": the mail server's host:port") {
		if l := f.String("addr", &s.Addr); l > 0 {
			if err := check.HostPort(s.Addr, false); err != nil {
				f.ErrorAt(l, f.Field("addr"), "%v", err)
			}
		}
	}
	if f.Required("from", ": the sender address") {
		if l := f.String("from", &s.From); l > 0 {
			if _, err := mail.ParseAddress(s.From); err != nil {
				f.ErrorAt(l, f.Field("from"), "%q is not a mail address", check.Clip(s.From))
			}
		}
	}
	if f.Required("to", ": a list of recipient addresses") {
		items, ok := f.List("to")
		if ok && f.Len("to") == 0 {
			f.Errorf("to", "must list at least one address")
		}
		for _, it := range items {
			if _, err := mail.ParseAddress(it.Value); err != nil {
				f.ErrorAt(it.Line, it.Field, "%q is not a mail address", check.Clip(it.Value))
				continue
			}
			s.To = append(s.To, it.Value)
		}
	}
	lUser := f.String("username", &s.Username)
	lPass := f.String("password", &s.Password)
	unreadable := (f.Has("username") && lUser == 0) || (f.Has("password") && lPass == 0)
	if !unreadable && (s.Username == "") != (s.Password == "") {
		if s.Username == "" {
			f.Errorf("username", "required when password is set")
		} else {
			f.Errorf("password", "required when username is set")
		}
	}
	if l := f.String("starttls", &s.StartTLS); l > 0 && !slices.Contains([]string{"auto", "always", "never"}, s.StartTLS) {
		f.ErrorAt(l, f.Field("starttls"), "must be auto, always or never, not %q", check.Clip(s.StartTLS))
	}
	return s
}

// Wire are an smtp endpoint's settings as the API shows them; the
// password is REDACTED.
type Wire struct {
	Addr     string   `json:"addr"`
	From     string   `json:"from"`
	To       []string `json:"to"`
	Username string   `json:"username,omitempty"`
	Password string   `json:"password,omitempty"`
	StartTLS string   `json:"starttls,omitempty"`
}

func wire(m *Settings) Wire {
	return Wire{Addr: m.Addr, From: m.From, To: m.To, Username: m.Username, Password: m.Password, StartTLS: m.StartTLS}
}
