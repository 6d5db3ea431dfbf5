package config

import (
	"cmp"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/mail"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/certfile"
	"go.yaml.in/yaml/v3"
)

var endpointFields = []string{"transport", "timeout", "max_concurrency", "max_concurrency_ceiling", "min_interval", "rate",
	"timeout_on", "suspend_on", "permanent", "retries_before_suspension", "suspension", "claim_check"}

// transportFields are the fields each transport takes besides the common
// ones; a field of another transport is a mistake worth naming as such.
var transportFields = map[courier.Transport][]string{
	courier.TransportHTTP: {"url", "method", "secret", "follow_redirects", "allow_networks", "tls"},
	courier.TransportSMTP: {"addr", "from", "to", "username", "password", "starttls"},
	courier.TransportFile: {"dir", "name"},
	courier.TransportAMQP: {"url", "exchange", "routing_key"},
	courier.TransportNATS: {"url", "subject"},
}

// allEndpointFields are the keys an endpoint may have whatever its transport.
var allEndpointFields = func() []string {
	all := slices.Clone(endpointFields)
	for _, t := range courier.Transports {
		for _, f := range transportFields[t] {
			if !slices.Contains(all, f) {
				all = append(all, f)
			}
		}
	}
	return all
}()

func (d *decoder) endpoints(n *yaml.Node, t *courier.Topology) {
	for _, p := range d.entries(n, "endpoints") {
		t.Endpoints[p.key] = d.endpoint(p)
	}
}

// endpoint reads one entry of endpoints: (or one endpoint of the store).
func (d *decoder) endpoint(p pair) *courier.Endpoint {
	path := "endpoints." + p.key
	d.checkName(p, path, courier.ValidName)
	o := d.object(p.value, path, p.line, allEndpointFields)
	var tr string
	if o.required("transport", ": one of http, smtp, file, amqp, nats") {
		if l := o.str("transport", &tr); l > 0 && !slices.Contains(courier.Transports, courier.Transport(tr)) {
			d.errorf(l, o.field("transport"), "must be http, smtp, file, amqp or nats, not %q", clip(tr))
		}
	}
	e := newEndpoint(p.key, courier.Transport(tr))
	if own, ok := transportFields[e.Transport]; ok {
		for _, f := range o.order {
			if !slices.Contains(endpointFields, f) && !slices.Contains(own, f) {
				o.errorf(f, "not a field of %s endpoints (it belongs to %s endpoints)", e.Transport, fieldOwners(f))
			}
		}
	}
	d.endpointRules(o, e)
	switch e.Transport {
	case courier.TransportHTTP:
		d.httpTarget(o, e)
	case courier.TransportSMTP:
		d.smtpTarget(o, e)
	case courier.TransportFile:
		d.fileTarget(o, e)
	case courier.TransportAMQP:
		d.amqpTarget(o, e)
	case courier.TransportNATS:
		d.natsTarget(o, e)
	}
	return e
}

func fieldOwners(f string) string {
	var owners []string
	for _, t := range courier.Transports {
		if slices.Contains(transportFields[t], f) {
			owners = append(owners, string(t))
		}
	}
	return strings.Join(owners, " and ")
}

// endpointRules reads the fields every transport shares: timeout, limits
// and the health rules of docs/design.md §4.
func (d *decoder) endpointRules(o *object, e *courier.Endpoint) {
	if l := o.duration("timeout", &e.Timeout); l > 0 && e.Timeout <= 0 {
		d.errorf(l, o.field("timeout"), "must be greater than 0")
	}
	d.concurrency(o, e)
	o.duration("min_interval", &e.MinInterval)
	o.parsed("rate", func(s string) (err error) {
		e.Rate, err = parseRate(s)
		return err
	})
	timeoutOn, timeoutGiven := d.classes(o, "timeout_on")
	suspendOn, suspendGiven := d.classes(o, "suspend_on")
	if permanent, ok := d.classes(o, "permanent"); ok {
		e.PermanentClasses = make([]courier.ErrorClass, 0, len(permanent))
		for _, c := range permanent {
			e.PermanentClasses = append(e.PermanentClasses, courier.ErrorClass(c.value))
		}
	}
	// A class cannot both count towards suspension and suspend at once.
	// Naming a class in one list takes it out of the other list's default,
	// so that "suspend_on: [http_5xx]" alone means what it says.
	switch {
	case timeoutGiven && suspendGiven:
		for _, c := range suspendOn {
			if slices.ContainsFunc(timeoutOn, func(t item) bool { return t.value == c.value }) {
				d.errorf(c.line, c.field, "%s is in timeout_on too; a class either counts towards suspension or suspends at once", c.value)
			}
		}
	case timeoutGiven:
		e.SuspendOn = slices.DeleteFunc(e.SuspendOn, func(c courier.ErrorClass) bool {
			return slices.ContainsFunc(timeoutOn, func(t item) bool { return t.value == string(c) })
		})
	case suspendGiven:
		e.TimeoutOn = slices.DeleteFunc(e.TimeoutOn, func(c courier.ErrorClass) bool {
			return slices.ContainsFunc(suspendOn, func(t item) bool { return t.value == string(c) })
		})
	}
	if timeoutGiven {
		e.TimeoutOn = toClasses(timeoutOn)
	}
	if suspendGiven {
		e.SuspendOn = toClasses(suspendOn)
	} else if e.AutoConcurrency {
		// A 429 is what an adaptive limit learns from: it cuts the limit
		// rather than suspending the endpoint, unless suspend_on says so.
		e.SuspendOn = slices.DeleteFunc(e.SuspendOn, func(c courier.ErrorClass) bool { return c == courier.ClassHTTP429 })
	}
	if l := o.integer("retries_before_suspension", &e.RetriesBeforeSuspension); l > 0 && e.RetriesBeforeSuspension < 0 {
		d.errorf(l, o.field("retries_before_suspension"), "must not be negative")
	}
	if s := o.sub("suspension", []string{"initial", "factor", "max"}); s != nil {
		d.backoff(s, &e.Suspension, false)
	}
	if c := o.sub("claim_check", []string{"above", "ttl"}); c != nil {
		e.ClaimCheck = d.claimCheck(c)
	}
}

// claimCheck reads an endpoint's claim_check: above, a size, and ttl, how
// long a notice's URL stays valid; a field left out takes its default.
// Its URLs expire on a whole second, so the ttl is at least one.
func (d *decoder) claimCheck(o *object) *courier.ClaimCheck {
	c := &courier.ClaimCheck{Above: courier.DefaultClaimCheckAbove, TTL: courier.DefaultClaimCheckTTL}
	if l := o.size("above", &c.Above); l > 0 && c.Above >= courier.MaxPayloadCeiling {
		d.errorf(l, o.field("above"), "must be less than %s, the largest payload courier takes", formatSize(courier.MaxPayloadCeiling))
	}
	if l := o.duration("ttl", &c.TTL); l > 0 && c.TTL < time.Second {
		d.errorf(l, o.field("ttl"), "must be at least 1s")
	}
	return c
}

// concurrency reads max_concurrency, a number or auto, and with auto the
// max_concurrency_ceiling it may reach (docs/design.md §4).
func (d *decoder) concurrency(o *object, e *courier.Endpoint) {
	l := o.parsed("max_concurrency", func(s string) error {
		if strings.TrimSpace(s) == "auto" {
			e.AutoConcurrency, e.MaxConcurrency = true, courier.DefaultConcurrencyCeiling
			return nil
		}
		v, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("%q is neither a whole number nor auto", clip(s))
		}
		e.MaxConcurrency = v
		return nil
	})
	if l > 0 && !e.AutoConcurrency && e.MaxConcurrency < 1 {
		d.errorf(l, o.field("max_concurrency"), "must be at least 1")
	}
	if !o.has("max_concurrency_ceiling") {
		return
	}
	if !e.AutoConcurrency {
		o.errorf("max_concurrency_ceiling", "only with max_concurrency: auto (a fixed max_concurrency is its own ceiling)")
		return
	}
	if l := o.integer("max_concurrency_ceiling", &e.MaxConcurrency); l > 0 && e.MaxConcurrency < 1 {
		d.errorf(l, o.field("max_concurrency_ceiling"), "must be at least 1")
	}
}

// classes reads a list of error classes; ok tells whether the list is given.
func (d *decoder) classes(o *object, name string) ([]item, bool) {
	items, ok := o.list(name)
	var good []item
	for _, it := range items {
		switch {
		case !courier.ErrorClass(it.value).Valid():
			d.errorf(it.line, it.field, "%q is not an error class%s", clip(it.value), suggestClass(it.value))
		case slices.ContainsFunc(good, func(g item) bool { return g.value == it.value }):
			d.errorf(it.line, it.field, "%s is listed twice", it.value)
		default:
			good = append(good, it)
		}
	}
	return good, ok
}

func suggestClass(s string) string {
	names := make([]string, len(courier.ErrorClasses))
	for i, c := range courier.ErrorClasses {
		names[i] = string(c)
	}
	if c := closest(s, names); c != "" {
		return fmt.Sprintf(" (did you mean %q?)", c)
	}
	return " (see docs/design.md §3 for the classes)"
}

func toClasses(items []item) []courier.ErrorClass {
	out := make([]courier.ErrorClass, len(items))
	for i, it := range items {
		out[i] = courier.ErrorClass(it.value)
	}
	return out
}

var httpMethods = []string{"POST", "PUT", "PATCH", "GET", "DELETE", "HEAD", "OPTIONS"}

func (d *decoder) httpTarget(o *object, e *courier.Endpoint) {
	h := &e.HTTP
	if o.required("url", ": the receiver's http or https URL") {
		if l := o.str("url", &h.URL); l > 0 && checkURL(h.URL, "http", "https") != nil {
			d.errorf(l, o.field("url"), "must be an absolute http or https URL")
		}
	}
	d.httpSettings(o, e)
}

// httpSettings reads an http endpoint's fields besides its URL: also those
// of the template of a lookup route's resolved endpoints.
func (d *decoder) httpSettings(o *object, e *courier.Endpoint) {
	h := &e.HTTP
	if l := o.str("method", &h.Method); l > 0 && !slices.Contains(httpMethods, h.Method) {
		d.errorf(l, o.field("method"), "must be one of %s, not %q", strings.Join(httpMethods, ", "), clip(h.Method))
	}
	var secret string
	if l := o.str("secret", &secret); l > 0 {
		h.Secrets = strings.Fields(secret)
		if len(h.Secrets) == 0 {
			d.errorf(l, o.field("secret"), "is empty; leave the field out to send unsigned requests")
		}
		for i, sec := range h.Secrets {
			// Never quoted back: the message would put the secret in a log.
			if enc, ok := strings.CutPrefix(sec, "whsec_"); ok && !validBase64(enc) {
				d.errorf(l, o.field("secret"), "secret %d of %d starts with whsec_ but is not base64 after it (Standard Webhooks secrets are whsec_<base64>)", i+1, len(h.Secrets))
			}
		}
	}
	o.boolean("follow_redirects", &h.FollowRedirects)
	for _, p := range d.networks(o, "allow_networks") {
		h.AllowNetworks = append(h.AllowNetworks, p.String())
	}
	if t := o.sub("tls", []string{"cert", "key", "ca"}); t != nil {
		d.httpTLS(t, &h.TLS)
	}
}

// httpTLS reads an endpoint's TLS files and checks that they load, so that
// a wrong path or a key that does not match shows at start, not at the
// first attempt. The messages never quote the files' content.
func (d *decoder) httpTLS(o *object, t *courier.HTTPTLS) {
	certLine := o.str("cert", &t.Cert)
	o.str("key", &t.Key)
	switch {
	case t.Cert != "" && t.Key == "":
		o.errorf("key", "required when tls.cert is set: the client certificate's private key")
	case t.Key != "" && t.Cert == "":
		o.errorf("cert", "required when tls.key is set: the client certificate")
	case t.Cert != "":
		if _, err := certfile.LoadKeyPair(t.Cert, t.Key); err != nil {
			d.errorf(certLine, o.field("cert"), "cannot load the client certificate with key %s: %s", t.Key, fileProblem(err))
		}
	}
	if l := o.str("ca", &t.CA); l > 0 {
		pem, err := certfile.Read(t.CA)
		switch {
		case err != nil:
			d.errorf(l, o.field("ca"), "cannot read the CA bundle: %s", fileProblem(err))
		case !x509.NewCertPool().AppendCertsFromPEM(pem):
			d.errorf(l, o.field("ca"), "%s holds no PEM certificate", t.CA)
		}
	}
}

// fileProblem says what is wrong with a file without the library's detail,
// which for a key file could echo what it read.
func fileProblem(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Path + ": " + pe.Err.Error()
	}
	msg := err.Error()
	if strings.Contains(msg, "private key does not match") {
		return "the private key does not match the certificate"
	}
	return "the files are not a PEM certificate and its PEM private key"
}

func validBase64(s string) bool {
	if _, err := base64.StdEncoding.DecodeString(s); err == nil {
		return s != ""
	}
	_, err := base64.RawStdEncoding.DecodeString(s)
	return err == nil && s != ""
}

func (d *decoder) smtpTarget(o *object, e *courier.Endpoint) {
	s := &e.SMTP
	if o.required("addr", ": the mail server's host:port") {
		if l := o.str("addr", &s.Addr); l > 0 {
			if err := checkHostPort(s.Addr, false); err != nil {
				d.errorf(l, o.field("addr"), "%v", err)
			}
		}
	}
	if o.required("from", ": the sender address") {
		if l := o.str("from", &s.From); l > 0 {
			if _, err := mail.ParseAddress(s.From); err != nil {
				d.errorf(l, o.field("from"), "%q is not a mail address", clip(s.From))
			}
		}
	}
	if o.required("to", ": a list of recipient addresses") {
		items, _ := o.list("to")
		if len(items) == 0 && o.value("to").Kind == yaml.SequenceNode && len(o.value("to").Content) == 0 {
			o.errorf("to", "must list at least one address")
		}
		for _, it := range items {
			if _, err := mail.ParseAddress(it.value); err != nil {
				d.errorf(it.line, it.field, "%q is not a mail address", clip(it.value))
				continue
			}
			s.To = append(s.To, it.value)
		}
	}
	lUser := o.str("username", &s.Username)
	lPass := o.str("password", &s.Password)
	unreadable := (o.has("username") && lUser == 0) || (o.has("password") && lPass == 0)
	if !unreadable && (s.Username == "") != (s.Password == "") {
		if s.Username == "" {
			o.errorf("username", "required when password is set")
		} else {
			o.errorf("password", "required when username is set")
		}
	}
	if l := o.str("starttls", &s.StartTLS); l > 0 && !slices.Contains([]string{"auto", "always", "never"}, s.StartTLS) {
		d.errorf(l, o.field("starttls"), "must be auto, always or never, not %q", clip(s.StartTLS))
	}
}

func (d *decoder) fileTarget(o *object, e *courier.Endpoint) {
	f := &e.File
	if o.required("dir", ": the directory files are written to") {
		if l := o.str("dir", &f.Dir); l > 0 && strings.TrimSpace(f.Dir) == "" {
			d.errorf(l, o.field("dir"), "must not be empty")
		}
	}
	if l := o.str("name", &f.Name); l > 0 {
		if err := checkNameTemplate(f.Name); err != nil {
			d.errorf(l, o.field("name"), "%v", err)
		}
	}
}

// checkNameTemplate accepts a file name with the placeholders {id}, {type}
// and {time}; it must stay one name inside the endpoint's directory.
func checkNameTemplate(s string) error {
	if s == "" || s == "." || s == ".." {
		return fmt.Errorf("must be a file name such as {id}.xml")
	}
	if strings.ContainsAny(s, `/\`) {
		return fmt.Errorf("must be a name without / or \\: files stay in dir")
	}
	for rest := s; rest != ""; {
		i := strings.IndexAny(rest, "{}")
		if i < 0 {
			break
		}
		if rest[i] == '}' {
			return fmt.Errorf("has a } without {")
		}
		end := strings.IndexByte(rest[i:], '}')
		if end < 0 {
			return fmt.Errorf("has a { without }")
		}
		if p := rest[i+1 : i+end]; !slices.Contains([]string{"id", "type", "time"}, p) {
			return fmt.Errorf("{%s} is not a placeholder: use {id}, {type} or {time}", clip(p))
		}
		rest = rest[i+end+1:]
	}
	return nil
}

func (d *decoder) amqpTarget(o *object, e *courier.Endpoint) {
	a := &e.AMQP
	if o.required("url", ": amqp:// or amqps:// URL of the broker") {
		if l := o.str("url", &a.URL); l > 0 && checkURL(a.URL, "amqp", "amqps") != nil {
			d.errorf(l, o.field("url"), "must be an amqp:// or amqps:// URL")
		}
	}
	o.str("exchange", &a.Exchange)
	o.str("routing_key", &a.RoutingKey)
	if a.Exchange == "" && a.RoutingKey == "" && !o.bad {
		o.errorf("routing_key", "required with the default exchange: it routes by queue name")
	}
}

func (d *decoder) natsTarget(o *object, e *courier.Endpoint) {
	n := &e.NATS
	if o.required("url", ": nats:// or tls:// URL of the server") {
		if l := o.str("url", &n.URL); l > 0 {
			// The NATS client takes a comma-separated list of servers.
			for _, u := range strings.Split(n.URL, ",") {
				if checkURL(strings.TrimSpace(u), "nats", "tls") != nil {
					d.errorf(l, o.field("url"), "must be a nats:// or tls:// URL (several separated by commas)")
					break
				}
			}
		}
	}
	if o.required("subject", ": the subject to publish on") {
		if l := o.str("subject", &n.Subject); l > 0 && !validSubject(n.Subject) {
			d.errorf(l, o.field("subject"), "%q is not a subject to publish on: dot-separated tokens without spaces or the wildcards * and >", clip(n.Subject))
		}
	}
}

func validSubject(s string) bool {
	for _, tok := range strings.Split(s, ".") {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsAny(tok, " \t\r\n") {
			return false
		}
	}
	return true
}

// checkClaimChecks refuses endpoints with a claim_check when courier has no
// public_url: their notices' URLs are built on it. It runs once the
// environment has had its say, as COURIER_PUBLIC_URL may set it. The
// topology held in the store is checked when it is used (an attempt fails
// and says why), as public_url is the server's, not the store's.
func (c *Config) checkClaimChecks() Errors {
	if c.Topology == nil {
		return nil
	}
	var errs Errors
	for _, at := range ClaimChecks(c.Topology) {
		if c.PublicURL == "" {
			errs = append(errs, &Error{File: c.File, Line: c.lines[at.Field], Field: at.Field,
				Message: NeedsPublicURL + "; set public_url in this file or COURIER_PUBLIC_URL (courier apply leaves this check to the server)"})
		}
		if c.Retention > 0 && at.Check.TTL >= c.Retention {
			f := at.Field + ".ttl"
			errs = append(errs, &Error{File: c.File, Line: cmp.Or(c.lines[f], c.lines[at.Field]), Field: f,
				Message: fmt.Sprintf("must be shorter than retention (%v): a delivered message, and the payload its link fetches, may be purged before the link expires", c.Retention)})
		}
	}
	return errs
}

// NeedsPublicURL is what a claim check says without public_url.
const NeedsPublicURL = "needs public_url: the URL in its notices, from which receivers fetch the payload, is built on it"

// ClaimCheckAt is a claim check of a topology and the field that sets it.
type ClaimCheckAt struct {
	Field string // endpoints.NAME.claim_check or routes.NAME.endpoint_template.claim_check
	Check *courier.ClaimCheck
}

// ClaimChecks lists the claim checks of t (an endpoint's, or a lookup
// route's template's), in name order: a topology with any needs
// public_url.
func ClaimChecks(t *courier.Topology) []ClaimCheckAt {
	var out []ClaimCheckAt
	for _, name := range slices.Sorted(maps.Keys(t.Endpoints)) {
		if cc := t.Endpoints[name].ClaimCheck; cc != nil {
			out = append(out, ClaimCheckAt{"endpoints." + name + ".claim_check", cc})
		}
	}
	// The endpoints a lookup route resolves take its template's.
	for _, name := range slices.Sorted(maps.Keys(t.Routes)) {
		if tpl := t.Routes[name].EndpointTemplate; tpl != nil && tpl.ClaimCheck != nil {
			out = append(out, ClaimCheckAt{"routes." + name + ".endpoint_template.claim_check", tpl.ClaimCheck})
		}
	}
	return out
}
