// Package topology keeps the topology that lives in the store (docs/design.md §15):
// every node's copy of it, in step with the store within a second, and the
// changes made through the API, checked by the configuration file's rules,
// written as one version each and recorded in the audit log. Secrets are
// sealed before they reach the store and never shown again.
package topology

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/config"
	"github.com/courier-gw/courier/internal/startstop"
	httptransport "github.com/courier-gw/courier/transport/http"
)

// Options configure a Keeper.
type Options struct {
	Store   courier.Store
	Keyring *Keyring // nil: no secrets can be stored
	Clock   courier.Clock
	Logger  *slog.Logger
	// OnChange, if set, is called with each new topology after this node
	// took it in (its own changes before they are answered), one call at a
	// time, in the order of versions.
	OnChange func(*courier.Topology)
	// ListenFunc, if set, tells of changes other nodes made as they commit
	// (postgres.Store.ListenTopology); the version is also polled every
	// PollInterval, so that a lost notice delays a change by that at most.
	ListenFunc func(ctx context.Context, changed func(version int64))
	// PollInterval is how often the store's version is looked at; 1 s when
	// zero.
	PollInterval time.Duration
	// KeysFile, when set, is the configuration file that holds the API
	// keys: then the store holds none, and writing one is refused.
	KeysFile string
	// PublicURL is the node's public_url. Without it, a change that gives
	// an endpoint a claim check is refused: its notices' URLs are built on
	// it.
	PublicURL string
	// Retention is the node's retention: a claim check's ttl must be
	// shorter (0: not checked).
	Retention time.Duration
	// Tenants are the configuration file's tenants (its tenants:
	// section), which every topology of the store's is given: the store
	// holds the tenants' objects, the file their settings. Nil when the
	// file has no tenants: section; the store then holds the tenants'
	// settings too (objects of courier.KindTenant).
	Tenants map[string]*courier.Tenant
	// TenantsFile is the configuration file that holds the tenants (it
	// has a tenants: section): writing a tenant is then refused, naming
	// it.
	TenantsFile string
}

// minSyncGap spaces the syncs that notices of other nodes' changes cause:
// a burst of changes (an apply one object at a time) is taken in a few at
// once rather than the topology being assembled for each.
const minSyncGap = 100 * time.Millisecond

// Keeper is this node's copy of the topology held in the store, and the
// way to change it. In file mode (FromFile) it only shows the file's
// objects and refuses changes.
type Keeper struct {
	startstop.Base // watches the store between Start and Stop

	opts Options
	file string // the file that holds the topology; empty when the store does

	// write serializes syncs and writes of this node; mu guards what they
	// change, held only briefly, so that reads never wait for the store.
	write   sync.Mutex
	mu      sync.RWMutex
	version int64
	entries map[objectKey]*entry
	// decoded holds the entries' decoded objects, and slot where each is,
	// so that a change assembles the topology from a copy of the slice
	// rather than from a walk of the map.
	decoded  []*config.Object
	slot     map[objectKey]int
	topology atomic.Pointer[courier.Topology]
	keys     atomic.Pointer[[]config.Key]
	signing  atomic.Pointer[[]httptransport.SigningKey] // signing.go
	tenants  atomic.Pointer[map[string]*courier.Tenant]
	// tenantsFile is Options.TenantsFile, until a reload's file has no
	// tenants: section.
	tenantsFile atomic.Pointer[string]

	poke chan struct{}
}

type objectKey struct {
	kind courier.TopologyKind
	name string
}

// entry is one object as this node knows it.
type entry struct {
	stored  courier.TopologyObject // as the store holds it: secrets sealed
	plain   []byte                 // the spec with its secrets open, canonical JSON
	decoded *config.Object         // nil in file mode
}

// Open reads the topology from the store and assembles it. An object that
// no longer passes the checks (written by another version of courier) is
// an error: the node would not deliver as the others do.
func Open(ctx context.Context, o Options) (*Keeper, error) {
	o.Clock = courier.ClockOrSystem(o.Clock)
	o.Logger = courier.LoggerOrDiscard(o.Logger)
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	if o.OnChange == nil {
		o.OnChange = func(*courier.Topology) {}
	}
	c := &Keeper{opts: o, entries: map[objectKey]*entry{}, slot: map[objectKey]int{}, poke: make(chan struct{}, 1)}
	c.tenants.Store(&o.Tenants)
	c.tenantsFile.Store(&o.TenantsFile)
	t, err := config.Assemble(nil)
	if err != nil {
		return nil, err
	}
	t.Tenants = o.Tenants
	c.topology.Store(t)
	if err := c.sync(ctx, true); err != nil {
		return nil, err
	}
	return c, nil
}

// FromFile returns a keeper that shows the objects of a configuration
// file and refuses every change, naming the file.
func FromFile(file string, specs config.Specs, t *courier.Topology) *Keeper {
	c := &Keeper{file: file}
	c.Reload(specs, t)
	return c
}

// Reload shows what a reloaded file holds, in file mode.
func (c *Keeper) Reload(specs config.Specs, t *courier.Topology) {
	entries := map[objectKey]*entry{}
	for kind, objs := range specs {
		for name, spec := range objs {
			entries[objectKey{kind, name}] = &entry{stored: courier.TopologyObject{Kind: kind, Name: name}, plain: spec}
		}
	}
	c.mu.Lock()
	c.entries = entries
	c.mu.Unlock()
	c.topology.Store(t)
}

// File is the configuration file that holds the topology, or empty when
// the store holds it.
func (c *Keeper) File() string { return c.file }

// Topology returns the topology in force on this node.
func (c *Keeper) Topology() *courier.Topology { return c.topology.Load() }

// Version returns the version of the topology this node has taken in.
func (c *Keeper) Version() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.version
}

// TenantsFile is the configuration file that holds the tenants' settings,
// or empty when the store holds them.
func (c *Keeper) TenantsFile() string {
	if c.file != "" {
		return c.file
	}
	if f := c.tenantsFile.Load(); f != nil {
		return *f
	}
	return ""
}

// Object returns one object with its secrets shown as Set.
func (c *Keeper) Object(kind courier.TopologyKind, name string) (courier.TopologyObject, bool) {
	c.mu.RLock()
	e, ok := c.entries[objectKey{kind, name}]
	c.mu.RUnlock()
	if !ok {
		return courier.TopologyObject{}, false
	}
	return e.shown(), true
}

// Keys returns the API keys the store holds, by name.
func (c *Keeper) Keys() []config.Key {
	if k := c.keys.Load(); k != nil {
		return *k
	}
	return nil
}

// Objects returns the objects of a kind by name, their secrets shown as
// Set; every object of the topology (keys and tenants are not part of
// it) when kind is empty.
func (c *Keeper) Objects(kind courier.TopologyKind) []courier.TopologyObject {
	c.mu.RLock()
	out := make([]courier.TopologyObject, 0, len(c.entries))
	for k, e := range c.entries {
		if kind == k.kind || (kind == "" && slices.Contains(courier.TopologyKinds, k.kind)) {
			out = append(out, e.shown())
		}
	}
	c.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return slices.Index(courier.TopologyKinds, out[i].Kind) < slices.Index(courier.TopologyKinds, out[j].Kind)
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// shown is the object as answers show it: its open spec with the
// secrets redacted.
func (e *entry) shown() courier.TopologyObject {
	o := e.stored
	o.Spec = redacted(e.plain)
	return o
}

// redacted returns a spec with its secrets shown as Set.
func redacted(plain []byte) []byte {
	if plain == nil {
		return nil
	}
	v, err := DecodeSpec(plain)
	if err != nil {
		return nil
	}
	redact(v)
	out, _ := json.Marshal(v)
	return out
}

// DecodeSpec reads a spec as generic JSON, numbers kept as written: one
// JSON value, nothing after it.
func DecodeSpec(spec []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(spec))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

// Sync takes in the changes other nodes made since this node last looked.
func (c *Keeper) Sync(ctx context.Context) error {
	if c.file != "" {
		return nil
	}
	return c.sync(ctx, false)
}

func (c *Keeper) sync(ctx context.Context, first bool) error {
	c.write.Lock()
	defer c.write.Unlock()
	return c.syncLocked(ctx, first)
}

// syncLocked reads what changed since this node's version and puts the
// topology it makes in force. Holding c.write.
func (c *Keeper) syncLocked(ctx context.Context, first bool) error {
	objs, v, err := c.opts.Store.TopologyChanges(ctx, c.version)
	if err != nil {
		return fmt.Errorf("read the topology's changes: %w", err)
	}
	if v == c.version && !first {
		return nil
	}
	fresh := map[objectKey]*entry{}
	gone := map[objectKey]bool{}
	var problems []string
	for _, o := range objs {
		k := objectKey{o.Kind, o.Name}
		if o.Spec == nil {
			gone[k] = true
			continue
		}
		e, err := c.open(o)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		fresh[k] = e
	}
	if len(problems) > 0 {
		err := fmt.Errorf("the topology's version %d has objects this node cannot use; it keeps the one it has:\n%s", v, strings.Join(problems, "\n"))
		if first {
			return err
		}
		c.opts.Logger.Error("topology change not taken in", "version", v, "err", err)
		return err
	}
	t, err := c.assemble(fresh, gone)
	if err != nil {
		err = fmt.Errorf("the topology's version %d does not hold together on this node; it keeps the one it has: %w", v, err)
		if !first {
			c.opts.Logger.Error("topology change not taken in", "version", v, "err", err)
		}
		return err
	}
	c.commit(v, fresh, gone, t)
	return nil
}

// open decodes a stored object: its secrets opened, its spec checked.
func (c *Keeper) open(o courier.TopologyObject) (*entry, error) {
	v, err := DecodeSpec(o.Spec)
	if err != nil {
		return nil, fmt.Errorf("%s %s: the stored spec is not JSON: %w", o.Kind, o.Name, err)
	}
	obj := string(o.Kind) + "/" + o.Name
	err = walkSecrets(v, func(_, s string) (string, error) {
		if !strings.HasPrefix(s, sealedPrefix) {
			return s, nil
		}
		return c.opts.Keyring.open(obj, s)
	})
	if err != nil {
		return nil, err
	}
	plain, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	decoded, err := config.DecodeObject(o.Kind, o.Name, plain)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", o.Kind, o.Name, err)
	}
	return &entry{stored: o, plain: plain, decoded: decoded}, nil
}

// assemble makes the topology of this node's objects with some replaced
// and some removed.
func (c *Keeper) assemble(fresh map[objectKey]*entry, gone map[objectKey]bool) (*courier.Topology, error) {
	c.mu.RLock()
	objs := make([]*config.Object, len(c.decoded), len(c.decoded)+len(fresh))
	copy(objs, c.decoded)
	for k, e := range fresh {
		if i, ok := c.slot[k]; ok {
			objs[i] = e.decoded
		} else {
			objs = append(objs, e.decoded)
		}
	}
	for k := range gone {
		if i, ok := c.slot[k]; ok {
			objs[i] = nil // Assemble passes over nil
		}
	}
	c.mu.RUnlock()
	t, err := config.Assemble(objs)
	if t != nil && c.fileTenants() {
		t.Tenants = *c.tenants.Load()
	}
	return t, err
}

// fileTenants reports whether the file holds the tenants' settings: then
// the store's tenants, if it has any, are not in force.
func (c *Keeper) fileTenants() bool {
	return c.TenantsFile() != "" || *c.tenants.Load() != nil
}

// SetTenants puts a reloaded file's tenants in force: the topology in
// force is given them, and told of as a change. A file without a tenants:
// section (nil) leaves the tenants to the store from then on.
func (c *Keeper) SetTenants(tenants map[string]*courier.Tenant) {
	c.write.Lock()
	defer c.write.Unlock()
	wasFile := c.fileTenants()
	c.tenants.Store(&tenants)
	if tenants == nil {
		if !wasFile {
			return // the store holds them, as it did
		}
		none := ""
		c.tenantsFile.Store(&none)
		t, err := c.assemble(nil, nil)
		if err != nil {
			c.opts.Logger.Error("the store's tenants do not hold together; the topology in force keeps none", "err", err)
			next := *c.topology.Load()
			next.Tenants = nil
			t = &next
		}
		c.topology.Store(t)
		c.opts.OnChange(t)
		return
	}
	next := *c.topology.Load()
	next.Tenants = tenants
	c.topology.Store(&next)
	c.opts.OnChange(&next)
}

// commit puts a version in force on this node. The version is reported
// last, once the parts that use the topology have it: whoever waits for
// the version (a client polling GET /v1/topology) finds the change in force.
func (c *Keeper) commit(v int64, fresh map[objectKey]*entry, gone map[objectKey]bool, t *courier.Topology) {
	keysChanged, signingChanged := false, false
	c.mu.Lock()
	for k := range gone {
		delete(c.entries, k)
		if i, ok := c.slot[k]; ok {
			// The last object takes the slot of the one gone.
			last := len(c.decoded) - 1
			c.decoded[i] = c.decoded[last]
			if moved := c.decoded[i]; moved != nil {
				c.slot[objectKey{moved.Kind, moved.Name}] = i
			}
			c.decoded[last] = nil
			c.decoded = c.decoded[:last]
			delete(c.slot, k)
		}
		keysChanged = keysChanged || k.kind == courier.KindKey
		signingChanged = signingChanged || k.kind == courier.KindSigningKey
	}
	for k, e := range fresh {
		c.entries[k] = e
		if i, ok := c.slot[k]; ok {
			c.decoded[i] = e.decoded
		} else {
			c.slot[k] = len(c.decoded)
			c.decoded = append(c.decoded, e.decoded)
		}
		keysChanged = keysChanged || k.kind == courier.KindKey
		signingChanged = signingChanged || k.kind == courier.KindSigningKey
	}
	if keysChanged || c.keys.Load() == nil {
		keys := keysOf(c.entries)
		c.keys.Store(&keys)
	}
	if signingChanged || c.signing.Load() == nil {
		signing := signingOf(c.entries)
		c.signing.Store(&signing)
	}
	c.mu.Unlock()
	c.topology.Store(t)
	c.opts.OnChange(t)
	c.mu.Lock()
	c.version = v
	c.mu.Unlock()
}

// keysOf returns the keys among entries, by name.
func keysOf(entries map[objectKey]*entry) []config.Key {
	var keys []config.Key
	for k, e := range entries {
		if k.kind == courier.KindKey && e.decoded != nil && e.decoded.Key != nil {
			keys = append(keys, *e.decoded.Key)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].Name < keys[j].Name })
	return keys
}

// Start watches the store for other nodes' changes until Stop.
func (c *Keeper) Start(ctx context.Context) error {
	if c.file != "" {
		return nil
	}
	run, ok := c.StartInit(ctx)
	if !ok {
		return ctx.Err()
	}
	var wg sync.WaitGroup
	if c.opts.ListenFunc != nil {
		wg.Go(func() {
			c.opts.ListenFunc(run.Ctx, func(v int64) {
				if v == 0 || v > c.Version() {
					select {
					case c.poke <- struct{}{}:
					default:
					}
				}
			})
		})
	}
	wg.Go(func() { c.watch(run.Ctx) })
	go func() {
		wg.Wait()
		run.Stopped()
	}()
	return nil
}

func (c *Keeper) watch(ctx context.Context) {
	tick := time.NewTicker(c.opts.PollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.poke:
		case <-tick.C:
			// The version alone is read, which costs the store one row.
			v, err := c.opts.Store.TopologyVersion(ctx)
			if err != nil || v == c.Version() {
				continue
			}
		}
		if err := c.Sync(ctx); err != nil && ctx.Err() == nil {
			c.opts.Logger.Warn("could not take in the topology's changes; will try again", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(minSyncGap):
		}
	}
}
