package topology

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/config"
)

// maxRetries bounds how often a change is decided again because another
// node changed the topology meanwhile.
const maxRetries = 20

// Put writes one object: created (true) or replaced. ifMatch, when not
// negative, is the version the object must have (0: it must not exist),
// else the change is refused with CodeFailedPrecondition. A spec that
// equals the stored one changes nothing and records nothing.
func (c *Keeper) Put(ctx context.Context, who string, kind courier.TopologyKind, name string, spec []byte, ifMatch int64) (courier.TopologyObject, bool, error) {
	var created bool
	var out courier.TopologyObject
	err := c.change(ctx, func() (*plan, error) {
		p := c.newPlan(who)
		old, exists := c.entry(kind, name)
		if err := checkMatch(kind, name, old, exists, ifMatch); err != nil {
			return nil, err
		}
		created = !exists
		return p, p.put(kind, name, spec)
	}, func([]courier.Action) {
		out, _ = c.Object(kind, name)
	})
	return out, created, err
}

// Delete removes one object, if nothing else uses it. ifMatch as for Put.
// A tenant is deleted with everything it owns (DeleteTenant).
func (c *Keeper) Delete(ctx context.Context, who string, kind courier.TopologyKind, name string, ifMatch int64) error {
	if kind == courier.KindTenant {
		return courier.Errorf(courier.CodeInvalidArgument, "a tenant is deleted with everything it owns, not alone")
	}
	return c.change(ctx, func() (*plan, error) {
		p := c.newPlan(who)
		old, exists := c.entry(kind, name)
		if !exists {
			return nil, courier.Errorf(courier.CodeNotFound, "no %s %q", kind, name)
		}
		if err := checkMatch(kind, name, old, exists, ifMatch); err != nil {
			return nil, err
		}
		p.remove(kind, name)
		return p, nil
	}, nil)
}

// Apply makes the store's topology hold the specs given (a file's
// sections): objects that differ are written, with how.Prune the objects
// the specs lack are deleted (of how.PruneTenant alone, when named), all
// as one version or, if anything is wrong, none. It returns the changes
// (with how.DryRun, the changes it would make).
func (c *Keeper) Apply(ctx context.Context, who string, specs map[courier.TopologyKind]map[string][]byte, how courier.Applying) ([]courier.Action, error) {
	var changes []courier.Action
	err := c.change(ctx, func() (*plan, error) {
		p := c.newPlan(who)
		p.dryRun = how.DryRun
		var problems config.Errors
		for _, kind := range append([]courier.TopologyKind{courier.KindTenant}, courier.TopologyKinds...) {
			names := make([]string, 0, len(specs[kind]))
			for name := range specs[kind] {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				err := p.put(kind, name, specs[kind][name])
				var es config.Errors
				switch {
				case errors.As(err, &es):
					problems = append(problems, es...)
				case err != nil:
					return nil, err
				}
			}
		}
		if len(problems) > 0 {
			return nil, problems
		}
		if how.Prune {
			for _, o := range c.Objects("") {
				if how.PruneTenant != "" && courier.TenantOf(o.Name) != how.PruneTenant {
					continue
				}
				if _, kept := specs[o.Kind][o.Name]; !kept {
					p.remove(o.Kind, o.Name)
				}
			}
		}
		return p, nil
	}, func(done []courier.Action) { changes = done })
	return changes, err
}

// DeleteTenant removes a tenant: its settings and every object it owns
// (endpoints, routes, policies, subscriptions and keys, by courier.TenantOf
// of their names), as one version, each delete recorded in the audit log
// as by who. It returns the changes. The tenants default and system always
// exist; a tenant the configuration file holds is deleted there. Its
// messages are not the keeper's: the caller erases them.
func (c *Keeper) DeleteTenant(ctx context.Context, who, tenant string) ([]courier.Action, error) {
	switch {
	case tenant == courier.DefaultTenant || tenant == courier.SystemTenant:
		return nil, courier.Errorf(courier.CodeConflict, "tenant %s always exists: its settings may be changed, it cannot be deleted", tenant)
	case c.file != "" || c.fileTenants():
		return nil, c.tenantsInFile()
	}
	var changes []courier.Action
	err := c.change(ctx, func() (*plan, error) {
		p := c.newPlan(who)
		c.mu.RLock()
		var owned []objectKey
		for k := range c.entries {
			if k.kind == courier.KindTenant && k.name == tenant || k.kind != courier.KindTenant && courier.TenantOf(k.name) == tenant {
				owned = append(owned, k)
			}
		}
		c.mu.RUnlock()
		if len(owned) == 0 {
			return nil, courier.Errorf(courier.CodeNotFound, "no such tenant: %q", tenant)
		}
		// The settings last, so that the log reads as the tenant emptied.
		sort.Slice(owned, func(i, j int) bool {
			a, b := owned[i], owned[j]
			if (a.kind == courier.KindTenant) != (b.kind == courier.KindTenant) {
				return b.kind == courier.KindTenant
			}
			if a.kind != b.kind {
				return a.kind < b.kind
			}
			return a.name < b.name
		})
		for _, k := range owned {
			p.remove(k.kind, k.name)
		}
		return p, nil
	}, func(done []courier.Action) { changes = done })
	return changes, err
}

// tenantsInFile is the refusal of a change of tenants the file holds.
func (c *Keeper) tenantsInFile() error {
	if c.TenantsFile() == "" {
		return courier.Errorf(courier.CodeConflict, "the tenants are given by the configuration file's section tenants: change them there and reload")
	}
	return courier.Errorf(courier.CodeConflict, "the tenants are in the configuration file %s: change them there and reload (SIGHUP or POST /v1/reload); to keep them in the store instead, remove the section tenants from the file", c.TenantsFile())
}

// RotateSecrets seals again, under the current key, every secret sealed
// under another, and reports how many objects it wrote.
func (c *Keeper) RotateSecrets(ctx context.Context, who string) (int, error) {
	if c.opts.Keyring == nil || c.opts.Keyring.current == nil {
		return 0, courier.Errorf(courier.CodeInvalidArgument, "this server has no secrets_key to rotate to")
	}
	n := 0
	err := c.change(ctx, func() (*plan, error) {
		p := c.newPlan(who)
		c.mu.RLock()
		defer c.mu.RUnlock()
		for k, e := range c.entries {
			v, err := DecodeSpec(e.stored.Spec)
			if err != nil {
				return nil, err
			}
			stale := false
			_ = walkSecrets(v, func(_, s string) (string, error) {
				if strings.HasPrefix(s, sealedPrefix) && !c.opts.Keyring.isCurrent(s) {
					stale = true
				}
				return s, nil
			})
			if stale {
				if err := p.rotate(k, e); err != nil {
					return nil, err
				}
			}
		}
		n = len(p.objects)
		return p, nil
	}, nil)
	return n, err
}

// entry returns this node's entry of an object.
func (c *Keeper) entry(kind courier.TopologyKind, name string) (*entry, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.entries[objectKey{kind, name}]
	return e, ok
}

func checkMatch(kind courier.TopologyKind, name string, old *entry, exists bool, ifMatch int64) error {
	switch {
	case ifMatch < 0:
		return nil
	case ifMatch == 0 && exists:
		return courier.Errorf(courier.CodeFailedPrecondition, "%s %q exists already (version %d)", kind, name, old.stored.Version)
	case ifMatch > 0 && !exists:
		return courier.Errorf(courier.CodeFailedPrecondition, "%s %q does not exist, so it is not at version %d", kind, name, ifMatch)
	case ifMatch > 0 && old.stored.Version != ifMatch:
		return courier.Errorf(courier.CodeFailedPrecondition, "%s %q is at version %d, not %d: read it again", kind, name, old.stored.Version, ifMatch)
	}
	return nil
}

// change decides a change on the newest topology and writes it; when
// another node wrote first, it takes that in and decides again. done, if
// set, is given the changes once they are in force here (with a dry run,
// the changes that would be made). A spec's problems (config.Errors) are
// the request's: CodeInvalidArgument.
func (c *Keeper) change(ctx context.Context, decide func() (*plan, error), done func([]courier.Action)) error {
	if c.file != "" {
		return courier.Errorf(courier.CodeConflict,
			"the topology is in the configuration file %s: change it there and reload (SIGHUP or POST /v1/reload); to keep it in the store instead, remove the sections endpoints, routes, policies and subscriptions from the file", c.file)
	}
	c.write.Lock()
	defer c.write.Unlock()
	for range maxRetries {
		if err := c.syncLocked(ctx, false); err != nil {
			return err
		}
		p, err := decide()
		var es config.Errors
		if errors.As(err, &es) {
			return courier.Errorf(courier.CodeInvalidArgument, "%s", es.Error())
		}
		if err != nil {
			return err
		}
		changes, err := c.carry(ctx, p)
		if errors.Is(err, courier.ErrTopologyMoved) {
			continue
		}
		if err == nil && done != nil {
			done(changes)
		}
		return err
	}
	return courier.Errorf(courier.CodeUnavailable, "the topology kept changing under this change; try again")
}

// plan is a change decided on this node's topology at one version.
type plan struct {
	c       *Keeper
	who     string
	now     time.Time
	base    int64
	fresh   map[objectKey]*entry
	gone    map[objectKey]bool
	objects []courier.TopologyObject
	actions []courier.Action
	// own says which objects the change was asked for by name, so that a
	// reference problem of theirs is the request's mistake (422), while one
	// of another object means the change breaks what uses it (409).
	own    map[objectKey]bool
	dryRun bool
}

func (c *Keeper) newPlan(who string) *plan {
	return &plan{c: c, who: who, now: c.opts.Clock.Now(), base: c.Version(), fresh: map[objectKey]*entry{}, gone: map[objectKey]bool{}, own: map[objectKey]bool{}}
}

// put plans writing an object, unless its spec is what is stored. The
// spec's problems are config.Errors, so that a batch reports all of them.
func (p *plan) put(kind courier.TopologyKind, name string, spec []byte) error {
	path := kind.Section() + "." + name
	if !kind.Valid() {
		return courier.Errorf(courier.CodeInvalidArgument, "%q is not a kind of topology object", kind)
	}
	v, err := DecodeSpec(spec)
	if _, isObject := v.(map[string]any); err != nil || !isObject {
		return config.Errors{{Field: path, Message: "must be a JSON object of the fields it has in the configuration file"}}
	}
	k := objectKey{kind, name}
	old, exists := p.c.entry(kind, name)
	var stored any
	if exists {
		stored, _ = DecodeSpec(old.plain)
	}
	if err := restore(kind.Section(), name, v, stored); err != nil {
		return err
	}
	// URLs with passwords are written as net/url writes them, so that the
	// same URL compares equal however it was spelt.
	_ = walkSecrets(v, func(_, s string) (string, error) { return s, nil })
	plain, err := json.Marshal(v)
	if err != nil {
		return err
	}
	p.own[k] = true
	if exists && bytes.Equal(plain, old.plain) {
		return nil
	}
	decoded, err := config.DecodeObject(kind, name, plain)
	if err != nil {
		return err
	}
	sealed, err := p.c.seal(kind, name, v)
	if err != nil {
		return err
	}
	a := p.action(courier.ActionCreate, k)
	if exists {
		a.Kind = courier.ActionReplace
		a.Before = string(redacted(old.plain))
	}
	a.After = string(redacted(plain))
	p.fresh[k] = &entry{stored: courier.TopologyObject{Kind: kind, Name: name, Spec: sealed}, plain: plain, decoded: decoded}
	p.objects = append(p.objects, p.fresh[k].stored)
	p.actions = append(p.actions, a)
	return nil
}

// remove plans deleting an object.
func (p *plan) remove(kind courier.TopologyKind, name string) {
	k := objectKey{kind, name}
	old, _ := p.c.entry(kind, name)
	a := p.action(courier.ActionDelete, k)
	a.Before = string(redacted(old.plain))
	p.gone[k] = true
	p.objects = append(p.objects, courier.TopologyObject{Kind: kind, Name: name})
	p.actions = append(p.actions, a)
}

// rotate plans sealing an object's secrets again. Holding c.mu for reading.
func (p *plan) rotate(k objectKey, e *entry) error {
	v, err := DecodeSpec(e.plain)
	if err != nil {
		return err
	}
	sealed, err := p.c.seal(k.kind, k.name, v)
	if err != nil {
		return err
	}
	a := p.action(courier.ActionRotateSecrets, k)
	a.Before = string(redacted(e.plain))
	a.After = a.Before
	p.fresh[k] = &entry{stored: courier.TopologyObject{Kind: k.kind, Name: k.name, Spec: sealed}, plain: e.plain, decoded: e.decoded}
	p.objects = append(p.objects, p.fresh[k].stored)
	p.actions = append(p.actions, a)
	return nil
}

func (p *plan) action(kind courier.ActionKind, k objectKey) courier.Action {
	return courier.Action{At: p.now, Who: p.who, Kind: kind, Object: k.kind, Subject: k.name}
}

// seal returns a spec with its secrets sealed for the store.
func (c *Keeper) seal(kind courier.TopologyKind, name string, plain any) ([]byte, error) {
	// A copy, through JSON, so that the open spec stays as it is.
	b, err := json.Marshal(plain)
	if err != nil {
		return nil, err
	}
	v, err := DecodeSpec(b)
	if err != nil {
		return nil, err
	}
	obj := string(kind) + "/" + name
	if err := walkSecrets(v, func(_, s string) (string, error) { return c.opts.Keyring.seal(obj, s) }); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// carry checks what a plan makes of the topology and writes it, and
// returns the changes made. Holding c.write.
func (c *Keeper) carry(ctx context.Context, p *plan) ([]courier.Action, error) {
	if len(p.objects) == 0 {
		return nil, nil
	}
	t, err := c.assemble(p.fresh, p.gone)
	if err != nil {
		return nil, p.refusal(err)
	}
	if err := c.checkClaimChecks(p, t); err != nil {
		return nil, err
	}
	if err := c.checkKeys(p); err != nil {
		return nil, err
	}
	if err := c.checkTenants(p, t); err != nil {
		return nil, err
	}
	var added []string // the tenants the plan gives new endpoints
	for k := range p.fresh {
		if _, existed := c.entry(k.kind, k.name); k.kind == courier.KindEndpoint && !existed {
			added = append(added, courier.TenantOf(k.name))
		}
	}
	if err := t.CheckEndpointQuotas(added); err != nil {
		return nil, err
	}
	if p.dryRun {
		return p.actions, nil
	}
	for i := range p.objects {
		p.objects[i].UpdatedAt, p.objects[i].UpdatedBy = p.now, p.who
	}
	v, err := c.opts.Store.WriteTopology(ctx, p.base, p.objects, p.actions)
	if err != nil {
		return nil, err
	}
	for _, e := range p.fresh {
		e.stored.Version, e.stored.UpdatedAt, e.stored.UpdatedBy = v, p.now, p.who
	}
	for i := range p.actions {
		p.actions[i].Version = v
	}
	c.commit(v, p.fresh, p.gone, t)
	return p.actions, nil
}

// checkKeys refuses a plan that touches keys the file holds, or that would
// leave the store's keys without an admin key: nobody could change keys or
// the topology any more, and with no key left at all the API would be open
// to every caller. (The first key must so be an admin key.)
// checkClaimChecks refuses a change that writes an endpoint or a lookup
// route with a claim check on a node without public_url, on which the
// URLs of its notices are built, or with a ttl not shorter than retention,
// past which the payload its links fetch may be purged.
func (c *Keeper) checkClaimChecks(p *plan, t *courier.Topology) error {
	for _, at := range config.ClaimChecks(t) {
		section, rest, _ := strings.Cut(at.Field, ".")
		name, _, _ := strings.Cut(rest, ".")
		written := false
		for k := range p.fresh {
			written = written || (k.kind.Section() == section && k.name == name)
		}
		switch {
		case !written:
		case c.opts.PublicURL == "":
			return courier.Errorf(courier.CodeInvalidArgument, "%s: %s; set it in the configuration of every node", at.Field, config.NeedsPublicURL)
		case c.opts.Retention > 0 && at.Check.TTL >= c.opts.Retention:
			return courier.Errorf(courier.CodeInvalidArgument, "%s.ttl: must be shorter than retention (%v): a delivered message, and the payload its link fetches, may be purged before the link expires", at.Field, c.opts.Retention)
		}
	}
	return nil
}

// checkTenants refuses a plan that writes a tenant's settings while the
// file holds them, or that writes an object of a tenant the topology t it
// would make does not have: no tenant's key could see or change it, and
// no tenant's quotas or share would hold it.
func (c *Keeper) checkTenants(p *plan, t *courier.Topology) error {
	for _, o := range p.objects {
		if o.Kind == courier.KindTenant && c.fileTenants() {
			return c.tenantsInFile()
		}
	}
	for k := range p.fresh {
		if k.kind == courier.KindTenant {
			continue
		}
		switch tenant := courier.TenantOf(k.name); {
		case tenant == courier.DefaultTenant || tenant == courier.SystemTenant || t.Tenants[tenant] != nil:
		default:
			return courier.Errorf(courier.CodeInvalidArgument, "%s %s: tenant %q does not exist; create it first (courier tenants create %s)",
				k.kind, k.name, tenant, tenant)
		}
	}
	return nil
}

func (c *Keeper) checkKeys(p *plan) error {
	touched := false
	for _, o := range p.objects {
		touched = touched || o.Kind == courier.KindKey
	}
	if !touched {
		return nil
	}
	if c.opts.KeysFile != "" {
		return courier.Errorf(courier.CodeConflict, "the API keys are in the configuration file %s: change them there and reload", c.opts.KeysFile)
	}
	c.mu.RLock()
	after := map[objectKey]*entry{}
	for k, e := range c.entries {
		if k.kind == courier.KindKey && !p.gone[k] {
			after[k] = e
		}
	}
	c.mu.RUnlock()
	for k, e := range p.fresh {
		if k.kind == courier.KindKey {
			after[k] = e
		}
	}
	for _, k := range keysOf(after) {
		if k.Role == courier.RoleAdmin {
			return nil
		}
	}
	return courier.Errorf(courier.CodeConflict, "this would leave no admin key: nobody could change keys or the topology any more (and with no key at all, anyone who reaches the API could); keep one admin key, or create one first")
}

// refusal says why the topology a plan makes does not hold together: a
// problem in an object the request wrote is the request's (422); one in
// another object means the change takes away what that one uses (409).
func (p *plan) refusal(err error) error {
	var es config.Errors
	if !errors.As(err, &es) {
		return err
	}
	var own, others config.Errors
	for _, e := range es {
		if p.owns(e.Field) {
			own = append(own, e)
		} else {
			others = append(others, e)
		}
	}
	if len(own) > 0 {
		return courier.Errorf(courier.CodeInvalidArgument, "%s", own.Error())
	}
	var users []string
	for _, e := range others {
		users = append(users, p.user(e))
	}
	var what []string
	for k := range p.gone {
		what = append(what, fmt.Sprintf("%s %q", k.kind, k.name))
	}
	for k := range p.fresh {
		what = append(what, fmt.Sprintf("%s %q", k.kind, k.name))
	}
	sort.Strings(what)
	return courier.Errorf(courier.CodeConflict, "%s is in use; change or delete what uses it first:\n%s", strings.Join(what, ", "), strings.Join(users, "\n"))
}

// user says what uses an object the plan takes away, "route \"acme\" uses
// endpoint \"acme\" (routes.acme.endpoints[0])", where e is the problem
// that this makes of it; another problem as it is.
func (p *plan) user(e *config.Error) string {
	if e.Undefined == nil || !p.gone[objectKey{e.Undefined.Kind, e.Undefined.Name}] {
		return e.Error()
	}
	what := fmt.Sprintf("%s %q", e.Undefined.Kind, e.Undefined.Name)
	// The object the field lies in; names may hold dots, so each known
	// object is tried, the longest name first.
	var by objectKey
	p.c.mu.RLock()
	for k := range p.c.entries {
		prefix := k.kind.Section() + "." + k.name
		if (strings.HasPrefix(e.Field, prefix+".") || strings.HasPrefix(e.Field, prefix+"[")) && len(k.name) > len(by.name) {
			by = k
		}
	}
	p.c.mu.RUnlock()
	if by.name == "" {
		return fmt.Sprintf("%s uses %s", e.Field, what)
	}
	return fmt.Sprintf("%s %q uses %s (%s)", by.kind, by.name, what, e.Field)
}

// owns reports whether a field path lies in an object the plan writes.
func (p *plan) owns(field string) bool {
	for k := range p.own {
		prefix := k.kind.Section() + "." + k.name
		if field == prefix || strings.HasPrefix(field, prefix+".") || strings.HasPrefix(field, prefix+"[") {
			return true
		}
	}
	return false
}
