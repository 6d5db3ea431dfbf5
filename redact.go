package courier

import (
	"log/slog"
	"net/url"
	"slices"
	"strings"
)

// Redacted is shown in place of a secret.
const Redacted = "REDACTED"

// Redacted returns a copy of e fit to show or log: its transport's
// settings redacted (Settings.Redacted), webhook secrets and passwords
// replaced by Redacted, passwords and query values left out of URLs.
// Whatever prints or logs an endpoint prints this.
func (e *Endpoint) Redacted() *Endpoint {
	c := *e
	if e.Settings != nil {
		c.Settings = e.Settings.Redacted()
	}
	return &c
}

// Target says where an endpoint delivers, with its secrets: a URL,
// smtp://host:port, a directory; empty when it has no settings.
func (e *Endpoint) Target() string {
	if e.Settings == nil {
		return ""
	}
	return e.Settings.Target()
}

// LogValue makes slog log the redacted endpoint.
func (e *Endpoint) LogValue() slog.Value {
	r := e.Redacted()
	return slog.GroupValue(slog.String("name", r.Name), slog.String("transport", string(r.Transport)),
		slog.String("target", r.Target()))
}

// RedactSecrets returns secrets with each replaced by Redacted, for
// Settings.Redacted; nil stays nil.
func RedactSecrets(secrets []string) []string {
	if len(secrets) == 0 {
		return secrets
	}
	return slices.Repeat([]string{Redacted}, len(secrets))
}

// RedactURL returns raw without the secrets of its user info and with the
// values of its query replaced (webhook URLs carry tokens there). A user
// with a password keeps the name and loses the password; a user part alone
// is replaced whole, as it is often the secret itself (nats://TOKEN@host,
// a token as the user name of an https URL). A comma-separated list of
// URLs (a NATS server list) is redacted URL by URL. Text that is not a URL
// is replaced whole, as it may be anything.
func RedactURL(raw string) string {
	if raw == "" {
		return ""
	}
	if strings.Contains(raw, ",") {
		parts := strings.Split(raw, ",")
		for i, p := range parts {
			if !strings.Contains(p, "://") {
				parts = nil // a comma within one URL, not a list
				break
			}
			parts[i] = redactOne(strings.TrimSpace(p))
		}
		if parts != nil {
			return strings.Join(parts, ",")
		}
	}
	return redactOne(raw)
}

func redactOne(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return Redacted
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{Redacted}
		}
		u.RawQuery = q.Encode()
	}
	if u.User != nil {
		if _, hasPassword := u.User.Password(); !hasPassword {
			u.User = url.User(Redacted)
		}
	}
	if u.Host == "" && strings.Contains(raw, "@") {
		// No authority ("TOKEN@host" without a scheme, "nats:TOKEN@host"):
		// the user info, if that is what it is, is out of reach of the above.
		return Redacted
	}
	return u.Redacted()
}
