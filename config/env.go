package config

import (
	"fmt"
	httptransport "github.com/courier-gw/courier/transport/http"
	"strings"
	"time"

	"github.com/courier-gw/courier/internal/check"
)

// expand replaces ${NAME} with the value of the variable NAME, so that
// secrets stay out of the file; $$ stands for a literal $, and a $ followed by
// anything else is kept as it is (passwords contain dollars).
func expand(s string, lookupEnv func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '$' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", fmt.Errorf("unterminated ${ (write $$ for a literal $)")
			}
			name := s[i+2 : i+2+end]
			if !validEnvName(name) {
				return "", fmt.Errorf("${%s} is not a valid variable reference: use letters, digits and _, not starting with a digit", check.Clip(name))
			}
			v, ok := "", false
			if lookupEnv != nil {
				v, ok = lookupEnv(name)
			}
			if !ok {
				return "", fmt.Errorf("environment variable %s is not set", name)
			}
			b.WriteString(v)
			i += 2 + end
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// envOverride is one COURIER_* variable and the top-level field it sets.
type envOverride struct {
	name    string
	field   string
	setFunc func(c *Config, v string) error
}

// envOverrides are the variables that override the file, so that one file
// serves several deployments (a container sets the store and listen address).
var envOverrides = []envOverride{
	{"COURIER_LISTEN", "listen", text(func(c *Config) *string { return &c.Listen })},
	{"COURIER_RETENTION", "retention", parsed(parseDuration, func(c *Config) *time.Duration { return &c.Retention })},
	{"COURIER_SHUTDOWN_TIMEOUT", "shutdown_timeout", parsed(parseDuration, func(c *Config) *time.Duration { return &c.ShutdownTimeout })},
	{"COURIER_MAX_PAYLOAD", "max_payload", parsed(ParseSize, func(c *Config) *int64 { return &c.MaxPayload })},
	{"COURIER_MAX_BATCH_BYTES", "max_batch_bytes", parsed(ParseSize, func(c *Config) *int64 { return &c.MaxBatchBytes })},
	{"COURIER_PUBLIC_URL", "public_url", text(func(c *Config) *string { return &c.PublicURL })},
	{"COURIER_STORE_DRIVER", "store.driver", text(func(c *Config) *string { return &c.Store.Driver })},
	{"COURIER_STORE_PATH", "store.path", text(func(c *Config) *string { return &c.Store.Path })},
	{"COURIER_STORE_DSN", "store.dsn", text(func(c *Config) *string { return &c.Store.DSN })},
	{"COURIER_STORE_BLOB_DIR", "store.blob_dir", text(func(c *Config) *string { return &c.Store.BlobDir })},
	{"COURIER_LOG_FORMAT", "log.format", text(func(c *Config) *string { return &c.Log.Format })},
	{"COURIER_LOG_LEVEL", "log.level", text(func(c *Config) *string { return &c.Log.Level })},
	{"COURIER_TLS_CERT", "tls.cert", text(func(c *Config) *string { return &c.TLS.Cert })},
	{"COURIER_TLS_KEY", "tls.key", text(func(c *Config) *string { return &c.TLS.Key })},
	{"COURIER_SECRETS_KEY", "secrets_key", parsed(parseSecretsKey, func(c *Config) *[]byte { return &c.SecretsKey })},
	{"COURIER_SECRETS_OLD_KEY", "secrets_old_key", parsed(parseSecretsKey, func(c *Config) *[]byte { return &c.SecretsOldKey })},
	{"COURIER_SIGNING_KEYS", "signing_keys", parsed(parseSigningKeys, func(c *Config) *[]httptransport.SigningKey { return &c.SigningKeys })},
	{"COURIER_OUTBOUND_PROXY", "outbound.proxy", parsed(parseProxy, func(c *Config) *string { return &c.Outbound.Proxy })},
}

// text sets a field to the variable's value as it is.
func text(field func(*Config) *string) func(*Config, string) error {
	return parsed(func(v string) (string, error) { return v, nil }, field)
}

// parsed sets a field to the variable's value read by parse; a value parse
// refuses leaves the field as it was.
func parsed[T any](parse func(string) (T, error), field func(*Config) *T) func(*Config, string) error {
	return func(c *Config, v string) error {
		x, err := parse(v)
		if err == nil {
			*field(c) = x
		}
		return err
	}
}

// ApplyEnv lets the COURIER_* variables override the top-level fields and
// checks the result, for a configuration read from a file as well as for
// Default(). A variable that is set but empty counts as unset, so that a
// deployment template may leave it blank. Errors name the variable.
func (c *Config) ApplyEnv(lookupEnv func(string) (string, bool)) error {
	errs := c.applyEnv(lookupEnv)
	errs = append(errs, c.checkServer()...)
	return errs.err()
}

func (c *Config) applyEnv(lookupEnv func(string) (string, bool)) Errors {
	if lookupEnv == nil {
		return nil
	}
	var errs Errors
	for _, o := range envOverrides {
		v, ok := lookupEnv(o.name)
		if !ok || v == "" {
			continue
		}
		if err := o.setFunc(c, v); err != nil {
			errs = append(errs, &Error{Field: o.name, Message: err.Error()})
			continue
		}
		if c.envs == nil {
			c.envs = make(map[string]string)
		}
		c.envs[o.field] = o.name
	}
	return errs
}

// parseDuration parses a Go duration string, refusing negative ones: no
// setting of courier means anything with a negative time.
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration: write a Go duration such as 30s, 5m or 48h", check.Clip(s))
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %s must not be negative", s)
	}
	return d, nil
}
