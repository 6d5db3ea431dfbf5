package api

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	httptransport "github.com/courier-gw/courier/transport/http"

	courier "github.com/courier-gw/courier"
	json "github.com/goccy/go-json"
)

// Objects holds the topology's objects (topology.Keeper is one): in the
// store, changed through the API, or in the configuration file, which
// refuses changes.
type Objects interface {
	// File is the configuration file that holds the topology; empty when
	// the store does.
	File() string
	// TenantsFile is the configuration file that holds the tenants'
	// settings; empty when the store does.
	TenantsFile() string
	Version() int64
	// Object and Objects show objects with their secrets as "set".
	Object(kind courier.TopologyKind, name string) (courier.TopologyObject, bool)
	Objects(kind courier.TopologyKind) []courier.TopologyObject
	// Put creates (true) or replaces an object; ifMatch, when not
	// negative, is the version it must have (0: it must not exist).
	Put(ctx context.Context, who string, kind courier.TopologyKind, name string, spec []byte, ifMatch int64) (courier.TopologyObject, bool, error)
	Delete(ctx context.Context, who string, kind courier.TopologyKind, name string, ifMatch int64) error
	// Apply makes the topology hold the specs (by kind, by name), with
	// prune deleting the others, and returns the changes.
	Apply(ctx context.Context, who string, specs map[courier.TopologyKind]map[string][]byte, how courier.Applying) ([]courier.Action, error)
	// RotateSecrets seals every secret under the current key again.
	RotateSecrets(ctx context.Context, who string) (int, error)
	// DeleteTenant removes a tenant's settings and every object it owns
	// as one change, and returns the changes.
	DeleteTenant(ctx context.Context, who, tenant string) ([]courier.Action, error)
}

// TopologyObject is one endpoint, route, policy or subscription: its
// fields as in the configuration file, secrets shown as "set", and the
// version that last wrote it (0 when the file holds the topology).
type TopologyObject struct {
	Kind      courier.TopologyKind `json:"kind"`
	Name      string               `json:"name"`
	Spec      json.RawMessage      `json:"spec"`
	Version   int64                `json:"version"`
	UpdatedAt *time.Time           `json:"updated_at,omitempty"`
	UpdatedBy string               `json:"updated_by,omitempty"`
	// Warnings are what the change is taken with but will not work as
	// written (an endpoint this node's SSRF guard refuses), also given in
	// Warning headers; only in the answer of a PUT.
	Warnings []string `json:"warnings,omitempty"`
}

// ObjectList is GET /v1/policies and /v1/subscriptions.
type ObjectList struct {
	Objects []TopologyObject `json:"objects"`
}

// Topology is GET /v1/topology, and the body of PUT /v1/topology: every
// object in the configuration file's form, section by section.
type Topology struct {
	Version       int64                      `json:"version,omitempty"`
	File          string                     `json:"file,omitempty"` // the file that holds it, when the store does not
	Endpoints     map[string]json.RawMessage `json:"endpoints,omitempty"`
	Routes        map[string]json.RawMessage `json:"routes,omitempty"`
	Policies      map[string]json.RawMessage `json:"policies,omitempty"`
	Subscriptions map[string]json.RawMessage `json:"subscriptions,omitempty"`
	// Tenants are tenants' settings, by tenant: in the body of PUT
	// /v1/topology alone, which a system key may give them in.
	Tenants map[string]json.RawMessage `json:"tenants,omitempty"`
}

// Section returns the part of t that holds objects of a kind.
func (t *Topology) Section(kind courier.TopologyKind) *map[string]json.RawMessage {
	switch kind {
	case courier.KindEndpoint:
		return &t.Endpoints
	case courier.KindRoute:
		return &t.Routes
	case courier.KindPolicy:
		return &t.Policies
	case courier.KindTenant:
		return &t.Tenants
	default:
		return &t.Subscriptions
	}
}

// ApplyResult is the answer of PUT /v1/topology: what changed (with
// dry_run, what would change) and the version it made.
type ApplyResult struct {
	Version int64    `json:"version"`
	DryRun  bool     `json:"dry_run,omitempty"`
	Changes []Change `json:"changes"`
	// Warnings are as TopologyObject's, one for each object written that
	// has one.
	Warnings []string `json:"warnings,omitempty"`
}

// Change is one object created, replaced or deleted.
type Change struct {
	Action courier.ActionKind   `json:"action"`
	Kind   courier.TopologyKind `json:"kind"`
	Name   string               `json:"name"`
	Before json.RawMessage      `json:"before,omitempty"`
	After  json.RawMessage      `json:"after,omitempty"`
}

// AuditEntry is one recorded action: an operator's action on a message or
// an endpoint, or a change of the topology (with the object's spec before
// and after, secrets shown as "set").
type AuditEntry struct {
	Seq     int64                `json:"seq"`
	At      time.Time            `json:"at"`
	Who     string               `json:"who"`
	Action  courier.ActionKind   `json:"action"`
	Object  courier.TopologyKind `json:"object,omitempty"`
	Subject string               `json:"subject"`
	Detail  string               `json:"detail,omitempty"`
	Before  json.RawMessage      `json:"before,omitempty"`
	After   json.RawMessage      `json:"after,omitempty"`
	Version int64                `json:"version,omitempty"`
}

// AuditPage is GET /v1/audit: entries newest first, and the cursor of
// the next page.
type AuditPage struct {
	Entries []AuditEntry `json:"entries"`
	Next    string       `json:"next,omitempty"`
}

// auditParams are the query parameters of GET /v1/audit.
var auditParams = []string{"who", "action", "object", "subject", "since", "until", "limit", "cursor"}

func toObject(o courier.TopologyObject) TopologyObject {
	v := TopologyObject{Kind: o.Kind, Name: o.Name, Spec: o.Spec, Version: o.Version, UpdatedBy: o.UpdatedBy, UpdatedAt: timePtr(o.UpdatedAt)}
	if v.Spec == nil {
		v.Spec = json.RawMessage("{}")
	}
	return v
}

func toChange(a courier.Action) Change {
	return Change{Action: a.Kind, Kind: a.Object, Name: a.Subject, Before: rawOrNil(a.Before), After: rawOrNil(a.After)}
}

func toAuditEntry(a courier.Action) AuditEntry {
	return AuditEntry{Seq: a.Seq, At: a.At, Who: a.Who, Action: a.Kind, Object: a.Object, Subject: a.Subject,
		Detail: a.Detail, Before: rawOrNil(a.Before), After: rawOrNil(a.After), Version: a.Version}
}

func rawOrNil(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

// objects returns the topology's objects, or says the server keeps none.
func (s *Server) objects() (Objects, error) {
	if s.opts.Objects == nil {
		return nil, courier.Errorf(courier.CodeNotConfigured, "this server keeps no topology objects")
	}
	return s.opts.Objects, nil
}

func (s *Server) handleTopology(w http.ResponseWriter, r *http.Request) {
	c, err := s.objects()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	sc := scopeOf(r)
	out := Topology{Version: c.Version(), File: c.File()}
	for _, o := range c.Objects("") {
		if !sc.owns(o.Name) {
			continue
		}
		sec := out.Section(o.Kind)
		if *sec == nil {
			*sec = map[string]json.RawMessage{}
		}
		(*sec)[sc.showName(o.Name)] = o.Spec
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleObjects(kind courier.TopologyKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, err := s.objects()
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		sc := scopeOf(r)
		out := ObjectList{Objects: []TopologyObject{}}
		for _, o := range c.Objects(kind) {
			if sc.owns(o.Name) {
				out.Objects = append(out.Objects, sc.showObject(toObject(o)))
			}
		}
		writeJSON(w, http.StatusOK, out)
	}
}

func (s *Server) handleObject(kind courier.TopologyKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sc := scopeOf(r)
		o, err := s.object(kind, sc.name(r.PathValue("name")))
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		setETag(w, o.Version)
		writeJSON(w, http.StatusOK, sc.showObject(toObject(o)))
	}
}

// object finds one object of the topology.
func (s *Server) object(kind courier.TopologyKind, name string) (courier.TopologyObject, error) {
	c, err := s.objects()
	if err != nil {
		return courier.TopologyObject{}, err
	}
	o, ok := c.Object(kind, name)
	if !ok {
		return o, courier.Errorf(courier.CodeNotFound, "no %s %q", kind, name)
	}
	return o, nil
}

// maxSpecBytes bounds the body of one object's PUT.
const maxSpecBytes = 1 << 20

// changeOf begins a change of one object: the objects and the version the
// request says the object must have; false once an error is answered.
func (s *Server) changeOf(w http.ResponseWriter, r *http.Request) (Objects, int64, bool) {
	c, err := s.objects()
	var ifMatch int64
	if err == nil {
		ifMatch, err = precondition(r)
	}
	if err != nil {
		s.writeError(w, r, err)
		return nil, 0, false
	}
	return c, ifMatch, true
}

// putObject creates or replaces the object kind/name with the request's
// body at the version the request names, and sets the answer's ETag, and
// its Location (location) when the object is new. It returns the object,
// the status to answer and the body; false once an error is answered.
func (s *Server) putObject(w http.ResponseWriter, r *http.Request, kind courier.TopologyKind, name, location string) (courier.TopologyObject, int, []byte, bool) {
	c, ifMatch, ok := s.changeOf(w, r)
	if !ok {
		return courier.TopologyObject{}, 0, nil, false
	}
	body, err := readBody(r, w, maxSpecBytes)
	var o courier.TopologyObject
	var created bool
	if err == nil {
		o, created, err = c.Put(r.Context(), actor(r), kind, name, body, ifMatch)
	}
	if err != nil {
		s.writeError(w, r, err)
		return courier.TopologyObject{}, 0, nil, false
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", location)
	}
	setETag(w, o.Version)
	return o, status, body, true
}

func (s *Server) handlePutObject(kind courier.TopologyKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sc := scopeOf(r)
		name := sc.name(r.PathValue("name"))
		o, status, body, ok := s.putObject(w, r, kind, name, sc.path("/v1/"+kind.Section()+"/"+r.PathValue("name")))
		if !ok {
			return
		}
		out := sc.showObject(toObject(o))
		out.Warnings = s.warnings(w, r, kind, map[string][]byte{name: body})
		writeJSON(w, status, out)
	}
}

func (s *Server) handleDeleteObject(kind courier.TopologyKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, ifMatch, ok := s.changeOf(w, r)
		if !ok {
			return
		}
		sc := scopeOf(r)
		if err := c.Delete(r.Context(), actor(r), kind, sc.name(r.PathValue("name")), ifMatch); err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"deleted": r.PathValue("name"), "kind": kind, "version": c.Version()})
	}
}

// precondition reads If-Match (the object's version, as its ETag gives
// it) and If-None-Match: * (the object must not exist yet): the version
// the object must have, 0 for none, -1 when the change is unconditional.
func precondition(r *http.Request) (int64, error) {
	if v := r.Header.Get("If-None-Match"); v != "" {
		if strings.TrimSpace(v) != "*" {
			return 0, courier.Errorf(courier.CodeInvalidArgument, `If-None-Match takes "*" (create only)`)
		}
		return 0, nil
	}
	v := strings.TrimSpace(r.Header.Get("If-Match"))
	if v == "" {
		return -1, nil
	}
	n, err := strconv.ParseInt(strings.Trim(strings.TrimPrefix(v, "W/"), `"`), 10, 64)
	if err != nil || n < 1 {
		return 0, courier.Errorf(courier.CodeInvalidArgument, `If-Match takes the object's version as its ETag gives it ("12"), not %q`, v)
	}
	return n, nil
}

func setETag(w http.ResponseWriter, version int64) {
	if version > 0 {
		w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(version, 10)))
	}
}

func (s *Server) handleApply(w http.ResponseWriter, r *http.Request) {
	c, err := s.objects()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	flags := map[string]bool{}
	for _, name := range []string{"prune", "dry_run"} {
		if v := r.URL.Query().Get(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				s.writeError(w, r, courier.Errorf(courier.CodeInvalidArgument, "%s must be true or false", name))
				return
			}
			flags[name] = b
		}
	}
	var in Topology
	if err := decodeBody(w, r, s.opts.MaxBatchBytes, &in, `a topology ({"endpoints": {...}, "routes": {...}, ...})`); err != nil {
		s.writeError(w, r, err)
		return
	}
	sc := scopeOf(r)
	specs := map[courier.TopologyKind]map[string][]byte{}
	for _, kind := range courier.TopologyKinds {
		objs := map[string][]byte{}
		for name, spec := range *in.Section(kind) {
			if q := sc.name(name); sc.owns(q) || sc.system && sc.tenant == courier.DefaultTenant {
				objs[q] = spec
				continue
			}
			s.writeError(w, r, courier.Errorf(courier.CodeInvalidArgument, "%s.%s: names another tenant's object; a tenant applies its own", kind.Section(), name))
			return
		}
		specs[kind] = objs
	}
	var tenantsWarning string
	if len(in.Tenants) > 0 && c.TenantsFile() != "" {
		// The file that lists the tenants for a topology's checks is often
		// the server's: its tenants are the server file's, not written.
		tenantsWarning = fmt.Sprintf("tenants: not applied: the server's tenants are in its configuration file %s", c.TenantsFile())
		in.Tenants = nil
	}
	if len(in.Tenants) > 0 {
		// A tenant's settings are the system's to write, by their names.
		if !sc.system || sc.tenant != courier.DefaultTenant {
			s.writeError(w, r, courier.Errorf(courier.CodeInvalidArgument, "tenants: a tenant's settings are applied by a key of tenant %s, without naming a tenant", courier.SystemTenant))
			return
		}
		specs[courier.KindTenant] = map[string][]byte{}
		for name, spec := range in.Tenants {
			specs[courier.KindTenant][name] = spec
		}
	}
	how := courier.Applying{Prune: flags["prune"], DryRun: flags["dry_run"], PruneTenant: sc.tenant}
	if sc.system && sc.tenant == courier.DefaultTenant {
		how.PruneTenant = "" // the whole topology, every tenant's objects written qualified
	}
	changes, err := c.Apply(r.Context(), actor(r), specs, how)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := ApplyResult{Version: c.Version(), DryRun: flags["dry_run"], Changes: []Change{}}
	written := map[string][]byte{}
	for _, a := range changes {
		ch := toChange(a)
		ch.Name = sc.showName(ch.Name)
		out.Changes = append(out.Changes, ch)
		if a.Object == courier.KindEndpoint && a.Kind != courier.ActionDelete {
			written[a.Subject] = specs[courier.KindEndpoint][a.Subject]
		}
	}
	out.Warnings = s.warnings(w, r, courier.KindEndpoint, written)
	for i := range out.Warnings {
		out.Warnings[i] = sc.showText(out.Warnings[i])
	}
	if tenantsWarning != "" {
		out.Warnings = append(out.Warnings, tenantsWarning)
		w.Header().Add("Warning", "299 courier "+strconv.Quote(tenantsWarning))
	}
	if n := len(out.Changes); n > 0 && !out.DryRun {
		s.opts.Logger.Info("topology applied", "by", actor(r), "changes", n, "version", out.Version)
	}
	writeJSON(w, http.StatusOK, out)
}

// warnings are what the objects of kind just written (specs by name) are
// taken with but will not work as written, each also set as a Warning
// header: an endpoint whose URL this node's SSRF guard refuses. Such an
// endpoint is taken rather than refused, because the guard's verdict is not
// the topology's to make: it depends on each node's outbound.allow_networks,
// which a reload changes, and on what the URL's name resolves to at the
// time of each connection. Told now, whoever wrote it need not wait for its
// first delivery to learn of it.
func (s *Server) warnings(w http.ResponseWriter, r *http.Request, kind courier.TopologyKind, specs map[string][]byte) []string {
	if kind != courier.KindEndpoint || s.opts.BlockedFunc == nil {
		return nil
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(specs)) {
		var spec struct {
			Transport     courier.Transport `json:"transport"`
			URL           string            `json:"url"`
			AllowNetworks []string          `json:"allow_networks"`
		}
		if json.Unmarshal(specs[name], &spec) != nil || spec.Transport != courier.TransportHTTP {
			continue
		}
		e := courier.NewEndpoint(name, spec.Transport)
		e.Settings = &httptransport.Settings{URL: spec.URL, AllowNetworks: spec.AllowNetworks}
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second) // a name that will not resolve says nothing
		why := s.opts.BlockedFunc(ctx, e)
		cancel()
		if why == "" {
			continue
		}
		msg := fmt.Sprintf("endpoints.%s.url: %s; until then, every delivery to it is suspended as rejected, blocked by the SSRF guard", name, why)
		out = append(out, msg)
		// RFC 9111's form: code 299 (a miscellaneous persistent warning),
		// the agent, the text quoted.
		w.Header().Add("Warning", "299 courier "+strconv.Quote(msg))
	}
	return out
}

func (s *Server) handleRotateSecrets(w http.ResponseWriter, r *http.Request) {
	c, err := s.objects()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	n, err := c.RotateSecrets(r.Context(), actor(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"rotated": n, "version": c.Version()})
}

func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	sc := scopeOf(r)
	f := courier.AuditFilter{Who: sc.nameIf(q.Get("who")), Kind: courier.ActionKind(q.Get("action")),
		Object: courier.TopologyKind(q.Get("object")), Subject: q.Get("subject"), Cursor: q.Get("cursor")}
	if f.Object != "" && !f.Object.Valid() {
		s.writeError(w, r, courier.Errorf(courier.CodeInvalidArgument, "object %q is not endpoint, route, policy or subscription", f.Object))
		return
	}
	if err := listParams(q, &f.Limit, map[string]*time.Time{"since": &f.Since, "until": &f.Until}); err != nil {
		s.writeError(w, r, err)
		return
	}
	page, err := s.opts.Store.Audit(r.Context(), f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := AuditPage{Entries: []AuditEntry{}, Next: page.Next}
	for _, a := range page.Actions {
		if a.Tenant() != sc.tenant {
			continue // another tenant's: a page may hold fewer than its limit
		}
		e := toAuditEntry(a)
		sc.showAudit(&e)
		out.Entries = append(out.Entries, e)
	}
	writeJSON(w, http.StatusOK, out)
}
