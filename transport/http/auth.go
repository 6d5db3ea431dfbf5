package http

import (
	"cmp"
	"encoding/base64"
	"net/http"
	"slices"
	"strings"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/check"
)

// Auth is how an http endpoint authenticates to its receiver: by at most
// one of basic credentials, a static bearer token, or OAuth2 client
// credentials, whose token courier obtains and keeps fresh.
type Auth struct {
	Basic  *BasicAuth
	Bearer string
	OAuth2 *OAuth2
}

// BasicAuth are the credentials of HTTP Basic authentication.
type BasicAuth struct {
	Username string
	Password string
}

// OAuth2 are the client credentials (RFC 6749 §4.4) of an endpoint: the
// token endpoint, the client's id and secret, and the scopes and the
// audience asked for.
type OAuth2 struct {
	TokenURL     string
	ClientID     string
	ClientSecret string
	Scopes       []string
	Audience     string
}

// Header is one of an endpoint's own request headers; a Secret one's value
// is sealed in the store and redacted wherever it is shown.
type Header struct {
	Name   string // canonical (X-Api-Key)
	Value  string
	Secret bool
}

// Kind names the credentials: "oauth2", "basic", "bearer", or "" for none.
func (a Auth) Kind() string {
	switch {
	case a.OAuth2 != nil:
		return "oauth2"
	case a.Basic != nil:
		return "basic"
	case a.Bearer != "":
		return "bearer"
	}
	return ""
}

// AuthKind names the credentials the endpoint sends (courier.AuthKind).
func (s *Settings) AuthKind() string { return s.Auth.Kind() }

var _ courier.AuthKind = (*Settings)(nil)

// redacted returns a copy without the secrets.
func (a Auth) redacted() Auth {
	c := a
	if a.Basic != nil {
		b := *a.Basic
		b.Password = courier.Redacted
		c.Basic = &b
	}
	if a.Bearer != "" {
		c.Bearer = courier.Redacted
	}
	if a.OAuth2 != nil {
		o := *a.OAuth2
		o.ClientSecret = courier.Redacted
		o.TokenURL = courier.RedactURL(o.TokenURL)
		c.OAuth2 = &o
	}
	return c
}

// redactedHeaders returns the headers with each secret value redacted.
func redactedHeaders(hs []Header) []Header {
	if hs == nil {
		return nil
	}
	out := slices.Clone(hs)
	for i := range out {
		if out[i].Secret {
			out[i].Value = courier.Redacted
		}
	}
	return out
}

// authFields are the fields of an endpoint's auth, and oauth2Fields those
// of its oauth2.
var (
	authFields   = []string{"basic", "bearer", "oauth2"}
	oauth2Fields = []string{"token_url", "client_id", "client_secret", "scopes", "audience"}
)

// decodeAuth reads an endpoint's auth and headers. No message quotes a
// secret: it would end up in a log.
func decodeAuth(f courier.SettingsFields, h *Settings) {
	if a := f.Sub("auth", authFields); a != nil {
		var given []string
		for _, k := range authFields {
			if a.Has(k) {
				given = append(given, k)
			}
		}
		switch {
		case len(given) == 0 && !a.Malformed():
			f.Errorf("auth", "give one of basic, bearer and oauth2")
		case len(given) > 1:
			f.Errorf("auth", "gives %s: give one of them", strings.Join(given, " and "))
		}
		if b := a.Sub("basic", []string{"username", "password"}); b != nil {
			h.Auth.Basic = &BasicAuth{}
			if b.Required("username", ": the user name of HTTP Basic authentication") {
				if l := b.String("username", &h.Auth.Basic.Username); l > 0 && strings.Contains(h.Auth.Basic.Username, ":") {
					b.ErrorAt(l, b.Field("username"), "must not contain a colon (HTTP Basic authentication cannot carry one)")
				}
			}
			if b.Required("password", ": the password of HTTP Basic authentication") {
				b.String("password", &h.Auth.Basic.Password)
			}
		}
		if a.Has("bearer") && a.Required("bearer", ": the token the receiver expects after \"Bearer \"") {
			switch l := a.String("bearer", &h.Auth.Bearer); {
			case l > 0 && h.Auth.Bearer == "":
				a.ErrorAt(l, a.Field("bearer"), "is empty: give the token the receiver expects after \"Bearer \"")
			case l > 0 && !courier.ValidHeaderValue("Bearer "+h.Auth.Bearer):
				a.ErrorAt(l, a.Field("bearer"), "cannot be sent in an HTTP header (a line break or a control character)")
			}
		}
		if o := a.Sub("oauth2", oauth2Fields); o != nil {
			h.Auth.OAuth2 = decodeOAuth2(o)
		}
	}
	decodeHeaders(f, h)
}

func decodeOAuth2(f courier.SettingsFields) *OAuth2 {
	o := &OAuth2{}
	if f.Required("token_url", ": the token endpoint of the receiver's authorization server") {
		if l := f.String("token_url", &o.TokenURL); l > 0 && check.URL(o.TokenURL, "http", "https") != nil {
			f.ErrorAt(l, f.Field("token_url"), "must be an absolute http or https URL")
		}
	}
	if f.Required("client_id", ": the client's id at the authorization server") {
		if l := f.String("client_id", &o.ClientID); l > 0 && o.ClientID == "" {
			f.ErrorAt(l, f.Field("client_id"), "is empty")
		}
	}
	if f.Required("client_secret", ": the client's secret at the authorization server") {
		if l := f.String("client_secret", &o.ClientSecret); l > 0 && o.ClientSecret == "" {
			f.ErrorAt(l, f.Field("client_secret"), "is empty")
		}
	}
	items, _ := f.List("scopes")
	for _, it := range items {
		if strings.ContainsAny(it.Value, " \t\"\\") {
			f.ErrorAt(it.Line, it.Field, "%q is not a scope (a scope has no spaces, quotes or backslashes)", check.Clip(it.Value))
			continue
		}
		o.Scopes = append(o.Scopes, it.Value)
	}
	f.String("audience", &o.Audience)
	return o
}

// decodeHeaders reads an endpoint's own headers: a value, or {secret:
// value} for one that is kept secret. Those courier sets itself cannot be
// given (docs/design.md §8), nor Authorization when auth sets it.
func decodeHeaders(f courier.SettingsFields, h *Settings) {
	var seen []string
	for _, e := range f.Entries("headers", []string{"secret"}) {
		name := http.CanonicalHeaderKey(e.Key)
		switch {
		case !courier.ValidHeaderName(e.Key):
			f.ErrorAt(e.Line, e.Field, "is not a valid HTTP header name")
			continue
		case ownHeader(e.Key):
			f.ErrorAt(e.Line, e.Field, "%s is set by courier itself (docs/design.md §8) and cannot be overridden", name)
			continue
		case name == "Authorization" && h.Auth.Kind() != "":
			f.ErrorAt(e.Line, e.Field, "Authorization is set by auth.%s: leave one of them out", h.Auth.Kind())
			continue
		case slices.Contains(seen, name):
			f.ErrorAt(e.Line, e.Field, "is %s again: header names are case-insensitive", name)
			continue
		}
		seen = append(seen, name)
		hd := Header{Name: name, Value: e.Value}
		if e.Sub != nil {
			hd.Secret = true
			if e.Sub.Required("secret", ": the header's value, kept secret") {
				e.Sub.String("secret", &hd.Value)
			}
		}
		switch {
		case hd.Value == "" && (e.Sub == nil || e.Sub.Has("secret")):
			f.ErrorAt(e.Line, e.Field, "is empty: give the header's value, or leave the header out")
		case !courier.ValidHeaderValue(hd.Value):
			f.ErrorAt(e.Line, e.Field, "cannot be sent in an HTTP header (a line break or a control character)")
		}
		h.Headers = append(h.Headers, hd)
	}
}

// ownHeader reports whether courier sets the header name k itself on every
// request (the transport's own, the framing headers, and traceparent), so
// that neither an endpoint nor a message may set it.
func ownHeader(k string) bool {
	switch strings.ToLower(k) {
	case "traceparent", "tracestate":
		return true
	}
	return reservedHeader(k)
}

// AuthWire is an endpoint's auth as the API shows it: the kind, and the
// fields that are no secret; secrets are REDACTED.
type AuthWire struct {
	Basic  *BasicWire  `json:"basic,omitempty"`
	Bearer string      `json:"bearer,omitempty"`
	OAuth2 *OAuth2Wire `json:"oauth2,omitempty"`
}

// BasicWire are basic credentials as the API shows them.
type BasicWire struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// OAuth2Wire are client credentials as the API shows them.
type OAuth2Wire struct {
	TokenURL     string   `json:"token_url"`
	ClientID     string   `json:"client_id"`
	ClientSecret string   `json:"client_secret"`
	Scopes       []string `json:"scopes,omitempty"`
	Audience     string   `json:"audience,omitempty"`
}

// authWire shows a (redacted) auth; nil for none.
func authWire(a Auth) *AuthWire {
	if a.Kind() == "" {
		return nil
	}
	w := &AuthWire{Bearer: a.Bearer}
	if a.Basic != nil {
		w.Basic = &BasicWire{Username: a.Basic.Username, Password: a.Basic.Password}
	}
	if o := a.OAuth2; o != nil {
		w.OAuth2 = &OAuth2Wire{TokenURL: o.TokenURL, ClientID: o.ClientID, ClientSecret: o.ClientSecret, Scopes: o.Scopes, Audience: o.Audience}
	}
	return w
}

// headersWire shows (redacted) headers by name; nil for none.
func headersWire(hs []Header) map[string]string {
	if len(hs) == 0 {
		return nil
	}
	out := make(map[string]string, len(hs))
	for _, h := range hs {
		out[h.Name] = h.Value
	}
	return out
}

// withCredentials puts the endpoint's own headers and its Authorization
// into h, in place of any of the same names the message gave, keeping h
// sorted by name. token is the OAuth2 access token, when auth is oauth2.
func withCredentials(h []headerField, s *Settings, token string) []headerField {
	if len(s.Headers) == 0 && s.Auth.Kind() == "" {
		return h
	}
	h = slices.DeleteFunc(h, func(f headerField) bool {
		return (f.name == "Authorization" && s.Auth.Kind() != "") ||
			slices.ContainsFunc(s.Headers, func(e Header) bool { return e.Name == f.name })
	})
	for _, e := range s.Headers {
		h = append(h, headerField{name: e.Name, value: e.Value})
	}
	switch {
	case s.Auth.OAuth2 != nil:
		h = append(h, headerField{name: "Authorization", value: "Bearer " + token})
	case s.Auth.Basic != nil:
		cred := base64.StdEncoding.EncodeToString([]byte(s.Auth.Basic.Username + ":" + s.Auth.Basic.Password))
		h = append(h, headerField{name: "Authorization", value: "Basic " + cred})
	case s.Auth.Bearer != "":
		h = append(h, headerField{name: "Authorization", value: "Bearer " + s.Auth.Bearer})
	}
	sortHeader(h)
	return h
}

// withoutSecretHeaders returns h without the endpoint's secret headers:
// like Authorization, they do not follow a redirect to another host.
func withoutSecretHeaders(h []headerField, s *Settings) []headerField {
	return slices.DeleteFunc(h, func(f headerField) bool {
		return slices.ContainsFunc(s.Headers, func(e Header) bool { return e.Secret && e.Name == f.name })
	})
}

// sortHeader sorts h by name, and the lines of one name by the message's
// spelling, as header makes them.
func sortHeader(h []headerField) {
	slices.SortFunc(h, func(a, b headerField) int {
		return cmp.Or(strings.Compare(a.name, b.name), strings.Compare(a.key, b.key))
	})
}
