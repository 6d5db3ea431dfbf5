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

// ref is a name used in one section that another section must define. They
// are checked after every section is read, so the order of sections in the
// file does not matter.
type ref struct {
	line   int
	field  string
	kind   string // "endpoint" or "route"
	name   string
	notice bool // the endpoint receives notices: smtp or http only
}

func (d *decoder) checkRefs(t *courier.Topology, refs []ref) {
	for _, r := range refs {
		switch r.kind {
		case "endpoint":
			e, ok := t.Endpoints[r.name]
			switch {
			case !ok:
				d.undefined(r, courier.KindEndpoint, suggest(r.name, t.Endpoints))
			case r.notice && e.Transport != courier.TransportSMTP && e.Transport != courier.TransportHTTP:
				d.errorf(r.line, r.field, "endpoint %q is a %s endpoint; notices go to smtp or http endpoints", r.name, e.Transport)
			}
		case "route":
			if _, ok := t.Routes[r.name]; !ok {
				d.undefined(r, courier.KindRoute, suggest(r.name, t.Routes))
			}
		case "fallback":
			switch rt, ok := t.Routes[r.name]; {
			case !ok:
				d.undefined(r, courier.KindRoute, suggest(r.name, t.Routes))
			case rt.Workflow != nil:
				d.errorf(r.line, r.field, "route %q is a workflow route: messages enter a workflow when they are sent, not by falling back", r.name)
			}
		case "policy":
			if _, ok := t.Policies[r.name]; !ok {
				d.undefined(r, courier.KindPolicy, suggest(r.name, t.Policies))
			}
		}
	}
}

// undefined reports that the object r names, of kind, is not defined.
func (d *decoder) undefined(r ref, kind courier.TopologyKind, suggestion string) {
	d.errs = append(d.errs, &Error{File: d.file, Line: r.line, Field: r.field,
		Message:   fmt.Sprintf("%s %q is not defined%s", kind, clip(r.name), suggestion),
		Undefined: &Reference{Kind: kind, Name: r.name}})
}

func suggest[V any](name string, defined map[string]V) string {
	names := make([]string, 0, len(defined))
	for n := range defined {
		names = append(names, n)
	}
	if s := closest(name, names); s != "" {
		return fmt.Sprintf(" (did you mean %q?)", s)
	}
	return ""
}

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

// backoff reads initial, factor, max (and jitter when withJitter) over the
// values b already has, then checks them together: a policy that sets only
// max must still end up with max >= initial.
func (d *decoder) backoff(o *object, b *courier.Backoff, withJitter bool) {
	lInitial := o.duration("initial", &b.Initial)
	lFactor := o.number("factor", &b.Factor)
	lMax := o.duration("max", &b.Max)
	if lInitial > 0 && b.Initial <= 0 {
		d.errorf(lInitial, o.field("initial"), "must be greater than 0")
	}
	if lFactor > 0 && b.Factor < 1 {
		d.errorf(lFactor, o.field("factor"), "must be at least 1")
	}
	// Against a base not known yet, only the values given together can be
	// compared; the rest is checked once the base is known.
	given := lMax > 0 || lInitial > 0
	if d.baseUnknown {
		given = lMax > 0 && lInitial > 0
	}
	if given && b.Initial > 0 && b.Max < b.Initial {
		if lMax > 0 {
			d.errorf(lMax, o.field("max"), "must be at least initial (%s)", b.Initial)
		} else {
			d.errorf(lInitial, o.field("initial"), "must not exceed max (%s)", b.Max)
		}
	}
	if withJitter {
		if l := o.number("jitter", &b.Jitter); l > 0 && (b.Jitter < 0 || b.Jitter > 1) {
			d.errorf(l, o.field("jitter"), "must be from 0 to 1 (a fraction of the delay)")
		}
	}
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

var routeFields = []string{"endpoints", "strategy", "weights", "ordered_on_failure", "workflow", "envelope", "compensation_policy",
	"lookup", "endpoint_template", "redrive"}

func (d *decoder) routes(n *yaml.Node, t *courier.Topology, refs *[]ref) {
	for _, p := range d.entries(n, "routes") {
		t.Routes[p.key] = d.route(p, refs)
	}
}

// route reads one entry of routes: (or one route of the store), adding the
// names it uses to refs.
func (d *decoder) route(p pair, refs *[]ref) *courier.Route {
	path := "routes." + p.key
	d.checkName(p, path, courier.ValidName)
	if strings.HasPrefix(p.key, "courier.") {
		d.errorf(p.line, path, "route names starting with \"courier.\" are reserved for courier's own notices")
	}
	o := d.object(p.value, path, p.line, routeFields)
	r := &courier.Route{Name: p.key, OrderedOnFailure: defaultOrderedOnFailure}
	switch {
	case o.has("workflow"):
		d.workflow(o, r, refs)
	case o.has("lookup") || o.has("endpoint_template"):
		d.lookup(o, r)
	}
	if r.Workflow == nil {
		for _, f := range []string{"envelope", "compensation_policy"} {
			if o.has(f) {
				o.errorf(f, "only a workflow route has it")
			}
		}
	}
	if r.Workflow == nil && r.Lookup == nil && o.required("endpoints", ": a list of endpoint names (or a workflow: of steps, or a lookup: of recipients)") {
		items, _ := o.list("endpoints")
		if v := o.value("endpoints"); v.Kind == yaml.SequenceNode && len(v.Content) == 0 {
			o.errorf("endpoints", "must list at least one endpoint")
		}
		for _, it := range items {
			if slices.Contains(r.Endpoints, it.value) {
				d.errorf(it.line, it.field, "endpoint %q is listed twice", clip(it.value))
				continue
			}
			r.Endpoints = append(r.Endpoints, it.value)
			*refs = append(*refs, ref{line: it.line, field: it.field, kind: "endpoint", name: it.value})
		}
	}
	r.Strategy = defaultStrategy(len(r.Endpoints))
	var strategy string
	if l := o.str("strategy", &strategy); l > 0 {
		switch s := courier.Strategy(strategy); {
		case !slices.Contains(courier.Strategies, s):
			d.errorf(l, o.field("strategy"), "must be single, failover, round_robin or weighted, not %q", clip(strategy))
		case s == courier.StrategySingle && len(r.Endpoints) > 1:
			d.errorf(l, o.field("strategy"), "single takes one endpoint and this route has %d; use failover, round_robin or weighted", len(r.Endpoints))
		default:
			r.Strategy = s
		}
	}
	if o.has("weights") && (strategy == "" || slices.Contains(courier.Strategies, courier.Strategy(strategy))) {
		d.weights(o, r, strategy)
	}
	oneOf(o, "ordered_on_failure", &r.OrderedOnFailure, courier.OrderedBlock, courier.OrderedSkip)
	d.redrive(o, r)
	return r
}

var redriveFields = []string{"on_recovery", "reasons", "max_age"}

// redrive reads a route's redrive: which suspended messages are resubmitted
// when one of its endpoints recovers. Only suspension reasons a receiver
// may take on a second try are allowed: never rejected or invalid.
func (d *decoder) redrive(o *object, r *courier.Route) {
	ro := o.sub("redrive", redriveFields)
	if ro == nil {
		return
	}
	if r.Workflow != nil || r.Lookup != nil {
		o.errorf("redrive", "only a route with endpoints of its own has it")
		return
	}
	rd := &courier.Redrive{MaxAge: courier.DefaultRedriveMaxAge}
	ro.boolean("on_recovery", &rd.OnRecovery)
	if items, ok := ro.list("reasons"); ok {
		if len(items) == 0 {
			ro.errorf("reasons", "must list at least one suspension reason (default [exhausted, expired])")
		}
		for _, it := range items {
			switch reason := courier.Reason(it.value); {
			case !reason.Valid():
				d.errorf(it.line, it.field, "%q is not a suspension reason", clip(it.value))
			case !reason.Redrivable():
				d.errorf(it.line, it.field, "%s messages are never re-driven: they would fail again", reason)
			case slices.Contains(rd.Reasons, reason):
				d.errorf(it.line, it.field, "%q is listed twice", reason)
			default:
				rd.Reasons = append(rd.Reasons, reason)
			}
		}
	}
	if len(rd.Reasons) == 0 {
		rd.Reasons = slices.Clone(courier.DefaultRedriveReasons)
	}
	if l := ro.duration("max_age", &rd.MaxAge); l > 0 && rd.MaxAge <= 0 {
		d.errorf(l, ro.field("max_age"), "must be greater than 0")
	}
	r.Redrive = rd
}

func (d *decoder) weights(o *object, r *courier.Route, strategy string) {
	if courier.Strategy(strategy) != courier.StrategyWeighted {
		o.errorf("weights", "only for strategy weighted")
		return
	}
	r.Weights = map[string]int{}
	for _, p := range d.entries(o.value("weights"), o.field("weights")) {
		wo := &object{d: d, path: o.field("weights"), line: p.line, fields: map[string]pair{p.key: p}}
		var w int
		l := wo.integer(p.key, &w)
		switch {
		case !slices.Contains(r.Endpoints, p.key):
			d.errorf(p.line, wo.field(p.key), "%q is not an endpoint of this route", clip(p.key))
		case l > 0 && w < 1:
			d.errorf(l, wo.field(p.key), "must be at least 1")
		case l > 0:
			r.Weights[p.key] = w
		case p.value == nil:
			wo.errorf(p.key, "required: a whole number of at least 1")
		}
	}
}

var policyFields = []string{"backoff", "schedule", "max_attempts", "max_age", "priority",
	"escalate", "fallback", "on_exhausted"}

// policies reads the default policy first: every other policy starts from it
// and overrides only what it gives.
func (d *decoder) policies(n *yaml.Node, t *courier.Topology, refs *[]ref) {
	d.policySet(d.entries(n, "policies"), t, refs)
}

// policySet reads the entries of policies: (or the policies of the store)
// into t, the default policy first.
func (d *decoder) policySet(entries []pair, t *courier.Topology, refs *[]ref) {
	base := courier.DefaultPolicy()
	for _, p := range entries {
		if p.key == courier.DefaultPolicyName {
			base = d.policy(p, base, refs)
		}
	}
	t.Policies[courier.DefaultPolicyName] = base
	for _, p := range entries {
		if p.key != courier.DefaultPolicyName {
			t.Policies[p.key] = d.policy(p, base, refs)
		}
	}
}

func (d *decoder) policy(p pair, base *courier.Policy, refs *[]ref) *courier.Policy {
	path := "policies." + p.key
	if !courier.ValidType(p.key) {
		d.errorf(p.line, path, "%q is not a message type: use 1 to %d letters, digits, '.', '_' or '-'", clip(p.key), courier.MaxTypeLen)
	}
	o := d.object(p.value, path, p.line, policyFields)
	pol := clonePolicy(base)
	pol.Name = p.key

	if b := o.sub("backoff", []string{"initial", "factor", "max", "jitter"}); b != nil {
		d.backoff(b, &pol.Backoff, true)
	}
	if o.has("schedule") {
		d.schedule(o, pol)
	} else if o.has("backoff") || o.has("max_attempts") {
		// Retrying by backoff or by count means this type does not follow
		// an inherited schedule, which would override both.
		pol.Schedule = nil
	}
	if l := o.integer("max_attempts", &pol.MaxAttempts); l > 0 && pol.MaxAttempts < 1 {
		d.errorf(l, o.field("max_attempts"), "must be at least 1 (1: no retries)")
	}
	if l := o.duration("max_age", &pol.MaxAge); l > 0 && pol.MaxAge <= 0 {
		d.errorf(l, o.field("max_age"), "must be greater than 0")
	}
	if l := o.integer("priority", &pol.Priority); l > 0 && (pol.Priority < 0 || pol.Priority > 9) {
		d.errorf(l, o.field("priority"), "must be from 0 to 9")
	}
	if o.has("escalate") {
		pol.Escalate = d.escalate(o, refs)
		// The engine fires escalations in this order, once each.
		slices.SortStableFunc(pol.Escalate, func(a, b courier.Escalation) int { return cmp.Compare(a.After, b.After) })
	}
	if o.has("fallback") {
		pol.Fallback = d.fallback(o, refs)
	}
	oneOf(o, "on_exhausted", &pol.OnExhausted, courier.ExhaustedSuspend, courier.ExhaustedDiscard)
	return pol
}

// schedule reads a table of delays, one per retry; it fixes the number of
// attempts, so max_attempts and backoff beside it would contradict it.
func (d *decoder) schedule(o *object, pol *courier.Policy) {
	if o.has("max_attempts") {
		o.errorf("max_attempts", "a schedule sets max_attempts (its length + 1); give one of them")
	}
	if o.has("backoff") {
		o.errorf("backoff", "a schedule replaces backoff; give one of them")
	}
	items, ok := o.list("schedule")
	if !ok {
		if o.value("schedule") == nil {
			o.errorf("schedule", "must list at least one delay (for no retries use max_attempts: 1)")
		}
		return
	}
	if len(items) == 0 {
		o.errorf("schedule", "must list at least one delay (for no retries use max_attempts: 1)")
		return
	}
	sched := make([]time.Duration, 0, len(items))
	for _, it := range items {
		v, err := parseDuration(it.value)
		switch {
		case err != nil:
			d.errorf(it.line, it.field, "%v", err)
		case v <= 0:
			d.errorf(it.line, it.field, "must be greater than 0")
		default:
			sched = append(sched, v)
		}
	}
	pol.Schedule = sched
	pol.MaxAttempts = len(sched) + 1
}

// escalate reads the notices of a policy; an empty value means none, even
// when the default policy has some.
func (d *decoder) escalate(o *object, refs *[]ref) []courier.Escalation {
	n := o.value("escalate")
	if n == nil {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		d.errorf(n.Line, o.field("escalate"), "must be a list of {after, notify}, not a %s", kindName(n))
		return nil
	}
	out := []courier.Escalation{}
	for i, c := range n.Content {
		path := fmt.Sprintf("%s[%d]", o.field("escalate"), i)
		if c = resolve(c); isNull(c) {
			d.errorf(nodeLine(c, n), path, "empty entry; write {after: ..., notify: ...}")
			continue
		}
		eo := d.object(c, path, c.Line, []string{"after", "notify"})
		var esc courier.Escalation
		if eo.required("after", ": the age of the message at which the notice goes out") {
			if l := eo.duration("after", &esc.After); l > 0 && esc.After <= 0 {
				d.errorf(l, eo.field("after"), "must be greater than 0")
			}
		}
		if eo.required("notify", ": an smtp or http endpoint") {
			if l := eo.str("notify", &esc.Notify); l > 0 {
				*refs = append(*refs, ref{line: l, field: eo.field("notify"), kind: "endpoint", name: esc.Notify, notice: true})
			}
		}
		out = append(out, esc)
	}
	return out
}

// fallback reads the backup route of a policy; an empty value means none,
// even when the default policy has one.
func (d *decoder) fallback(o *object, refs *[]ref) *courier.Fallback {
	if o.value("fallback") == nil {
		return nil
	}
	fo := o.sub("fallback", []string{"after", "route"})
	f := &courier.Fallback{}
	fo.duration("after", &f.After)
	if fo.required("route", ": the route that takes over") {
		if l := fo.str("route", &f.Route); l > 0 {
			*refs = append(*refs, ref{line: l, field: fo.field("route"), kind: "fallback", name: f.Route})
		}
	}
	return f
}

func clonePolicy(p *courier.Policy) *courier.Policy {
	c := *p
	c.Schedule = slices.Clone(p.Schedule)
	c.Escalate = slices.Clone(p.Escalate)
	if p.Fallback != nil {
		f := *p.Fallback
		c.Fallback = &f
	}
	return &c
}

var stepFields = []string{"endpoint", "compensate"}

// workflow reads a workflow route: its steps, each an endpoint and the
// endpoint that undoes it, instead of endpoints of its own.
func (d *decoder) workflow(o *object, r *courier.Route, refs *[]ref) {
	for _, f := range []string{"endpoints", "strategy", "weights", "lookup", "endpoint_template"} {
		if o.has(f) {
			o.errorf(f, "not a field of a workflow route: its steps name their endpoints")
		}
	}
	w := &courier.Workflow{}
	r.Workflow = w
	n := o.value("workflow")
	if n == nil || n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		o.errorf("workflow", "must list the steps: - {endpoint: a, compensate: a-cancel}")
		return
	}
	for i, c := range n.Content {
		path := fmt.Sprintf("%s[%d]", o.field("workflow"), i)
		so := d.object(resolve(c), path, nodeLine(c, n), stepFields)
		var step courier.WorkflowStep
		if so.required("endpoint", ": the endpoint of this step") {
			if l := so.str("endpoint", &step.Endpoint); l > 0 {
				*refs = append(*refs, ref{line: l, field: so.field("endpoint"), kind: "endpoint", name: step.Endpoint})
			}
		}
		if l := so.str("compensate", &step.Compensate); l > 0 && step.Compensate != "" {
			*refs = append(*refs, ref{line: l, field: so.field("compensate"), kind: "endpoint", name: step.Compensate})
		}
		w.Steps = append(w.Steps, step)
	}
	o.boolean("envelope", &w.Envelope)
	if l := o.str("compensation_policy", &w.CompensationPolicy); l > 0 {
		*refs = append(*refs, ref{line: l, field: o.field("compensation_policy"), kind: "policy", name: w.CompensationPolicy})
	}
	r.Strategy = courier.StrategySingle
}

var lookupFields = []string{"url", "timeout", "cache_ttl", "negative_ttl"}

// lookup reads a route that resolves each message's endpoint from its
// recipient through a registry: the registry, and the settings of the
// endpoints it resolves.
func (d *decoder) lookup(o *object, r *courier.Route) {
	for _, f := range []string{"endpoints", "strategy", "weights"} {
		if o.has(f) {
			o.errorf(f, "not a field of a lookup route: its endpoint is resolved for each recipient")
		}
	}
	l := &courier.Lookup{Timeout: courier.DefaultLookupTimeout, CacheTTL: courier.DefaultLookupCacheTTL,
		NegativeTTL: courier.DefaultLookupNegativeTTL}
	r.Lookup, r.Strategy = l, courier.StrategySingle
	lo := o.sub("lookup", lookupFields)
	if lo == nil {
		o.errorf("lookup", "required with endpoint_template: the registry that resolves recipients ({url: ...})")
		lo = d.object(nil, o.field("lookup"), o.keyLine("endpoint_template"), lookupFields)
	}
	if lo.required("url", ": the registry's URL, with {recipient} (and {type})") {
		if line := lo.str("url", &l.URL); line > 0 {
			switch {
			case checkURL(l.LookupURL("r", "t"), "http", "https") != nil:
				d.errorf(line, lo.field("url"), "must be an absolute http or https URL")
			case !strings.Contains(l.URL, "{recipient}"):
				d.errorf(line, lo.field("url"), "must contain {recipient}, where the message's recipient goes")
			}
		}
	}
	for _, f := range []struct {
		name string
		dst  *time.Duration
	}{{"timeout", &l.Timeout}, {"cache_ttl", &l.CacheTTL}, {"negative_ttl", &l.NegativeTTL}} {
		if line := lo.duration(f.name, f.dst); line > 0 && *f.dst <= 0 {
			d.errorf(line, lo.field(f.name), "must be greater than 0")
		}
	}
	e := newEndpoint("", courier.TransportHTTP)
	fields := append(slices.Clone(endpointFields), transportFields[courier.TransportHTTP]...)
	to := d.object(o.value("endpoint_template"), o.field("endpoint_template"), o.keyLine("endpoint_template"), fields)
	var tr string
	if line := to.str("transport", &tr); line > 0 && tr != string(courier.TransportHTTP) {
		d.errorf(line, to.field("transport"), "resolved endpoints are http endpoints, not %q", clip(tr))
	}
	if to.has("url") {
		to.errorf("url", "not a field of the template: the registry gives each resolved endpoint its URL")
	}
	d.endpointRules(to, e)
	d.httpSettings(to, e)
	r.EndpointTemplate = e
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
