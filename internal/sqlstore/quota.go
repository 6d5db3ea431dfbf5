package sqlstore

import (
	"slices"
	"sync/atomic"

	courier "github.com/courier-gw/courier"
)

// Quotas are the tenants' caps a store was given (Store.SetTenantQuotas),
// read by every ingest: without a capped tenant, a look at an empty map.
type Quotas struct {
	capped atomic.Pointer[map[string]courier.Quotas]
}

// Set keeps the quotas of the tenants that have caps.
func (q *Quotas) Set(quotas map[string]courier.Quotas) {
	capped := map[string]courier.Quotas{}
	for t, tq := range quotas {
		if tq.Capped() {
			capped[t] = tq
		}
	}
	q.capped.Store(&capped)
}

// Of returns the capped tenants of msgs, sorted (the order their locks
// are taken in), with their quotas; none (nil) in the common case.
func (q *Quotas) Of(msgs []*courier.Message) (tenants []string, quotas map[string]courier.Quotas) {
	p := q.capped.Load()
	if p == nil || len(*p) == 0 {
		return nil, nil
	}
	for _, m := range msgs {
		t := courier.TenantOfID(m.ID)
		if tq, ok := (*p)[t]; ok && !slices.Contains(tenants, t) {
			if quotas == nil {
				quotas = map[string]courier.Quotas{}
			}
			tenants, quotas[t] = append(tenants, t), tq
		}
	}
	slices.Sort(tenants)
	return tenants, quotas
}

// CheckQuotas checks, after an ingest stored what results say, the capped
// tenants it added to against their use then (usage, read in the
// ingest's transaction), as courier.CheckQuotas decides.
func CheckQuotas(quotas map[string]courier.Quotas, msgs []*courier.Message, results []courier.IngestResult,
	usage func(tenants []string) (map[string]courier.TenantUsage, error)) error {
	added, addedBytes := map[string]int64{}, map[string]int64{}
	var tenants []string
	for i, m := range msgs {
		t := courier.TenantOfID(m.ID)
		if _, ok := quotas[t]; !ok || results[i].Status != courier.IngestCreated || m.State.Terminal() {
			continue
		}
		if added[t] == 0 {
			tenants = append(tenants, t)
		}
		added[t]++
		addedBytes[t] += int64(StoredSize(m))
	}
	if len(tenants) == 0 {
		return nil
	}
	use, err := usage(tenants)
	if err != nil {
		return err
	}
	for _, t := range tenants {
		u := use[t]
		u.Tenant = t
		if err := courier.CheckQuotas(t, quotas[t], u, added[t], addedBytes[t]); err != nil {
			return err
		}
	}
	return nil
}

// Fits reports whether msgs fit the caps of their tenants given their use,
// even if every one of them were new, and if so adds them to use: a
// group of ingests admits by it the calls it may store without a check
// after them (CheckQuotas).
func Fits(quotas map[string]courier.Quotas, msgs []*courier.Message, use map[string]courier.TenantUsage) bool {
	var after UsageCounts
	for _, m := range msgs {
		if _, ok := quotas[courier.TenantOfID(m.ID)]; ok {
			after.Add(m.ID, StoredSize(m), "", m.State)
		}
	}
	for _, a := range after.Rows() {
		u := use[a.Tenant]
		u.Tenant, u.Queued, u.Bytes = a.Tenant, u.Queued+a.Queued, u.Bytes+a.Bytes
		if courier.CheckQuotas(a.Tenant, quotas[a.Tenant], u, a.Queued, a.Bytes) != nil {
			return false
		}
	}
	for _, a := range after.Rows() {
		u := use[a.Tenant]
		u.Tenant, u.Queued, u.Bytes = a.Tenant, u.Queued+a.Queued, u.Bytes+a.Bytes
		use[a.Tenant] = u
	}
	return true
}

// StoredSize is the size a message's row keeps: its payload's, or its
// blob's.
func StoredSize(m *courier.Message) int {
	if m.Blob != "" || len(m.Payload) == 0 {
		return m.Size
	}
	return len(m.Payload)
}

// UsageCounts gathers what one transaction changes of the tenants' use:
// one row to write per tenant, not per message (as TypeCounts). A message
// finds its tenant's row by an index, so that a transaction touching many
// tenants' messages costs what it counts, not that times the tenants.
type UsageCounts struct {
	rows  []courier.TenantUsage
	index map[string]int // of rows, by tenant
}

// Add counts a message, by its stored id and size, that went from state
// from (empty: none, a new row) to state to: made live, or finished.
func (c *UsageCounts) Add(id string, size int, from, to courier.State) {
	delta := int64(0)
	if from != "" && !from.Terminal() {
		delta--
	}
	if !to.Terminal() {
		delta++
	}
	if delta == 0 {
		return
	}
	t := courier.TenantOfID(id)
	i, ok := c.index[t]
	if !ok {
		if c.index == nil {
			c.index = map[string]int{}
		}
		i = len(c.rows)
		c.index[t] = i
		c.rows = append(c.rows, courier.TenantUsage{Tenant: t})
	}
	u := &c.rows[i]
	u.Queued += delta
	u.Bytes += delta * int64(size)
}

// Of returns what c counted of tenant.
func (c *UsageCounts) Of(tenant string) courier.TenantUsage {
	if i, ok := c.index[tenant]; ok {
		return c.rows[i]
	}
	return courier.TenantUsage{Tenant: tenant}
}

// Rows returns what c counted, a row per tenant, in the order first
// counted.
func (c *UsageCounts) Rows() []courier.TenantUsage { return c.rows }

// Reset forgets what c counted, keeping its room for the next
// transaction.
func (c *UsageCounts) Reset() {
	c.rows = c.rows[:0]
	clear(c.index)
}
