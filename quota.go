package courier

import (
	"context"
	"math"
	"sync"
	"time"
)

// Tenants' quotas (docs/design.md §20, Quotas): the store keeps each
// tenant's use (TenantUsage) and refuses an ingest that takes a tenant past
// its caps (CheckQuotas); the ingest rate is a token bucket per tenant
// (TakeTokens), held by the store's SharedLimits where several nodes share
// a store and by TokenBuckets where one process does.

// TenantUsage is a tenant's use of what its quotas bound: its messages not
// yet finished (queued, in flight or suspended; each delivery of a
// published message counts) and the bytes of their payloads (a shared
// payload counts once per such delivery).
type TenantUsage struct {
	Tenant string
	Queued int64
	Bytes  int64
}

// Capped reports whether q bounds what a store counts at ingest: queued
// messages or their bytes.
func (q Quotas) Capped() bool { return q.MaxQueued > 0 || q.MaxBytes > 0 }

// The quotas by the names an error names them with.
const (
	QuotaMaxQueued    = "max_queued"
	QuotaMaxBytes     = "max_bytes"
	QuotaIngestRate   = "ingest_rate"
	QuotaMaxEndpoints = "max_endpoints"
)

// QuotaRefusal marks e as a refusal by the tenant's quota named quota
// (Error.Quota, RefusedBy) and returns it.
func QuotaRefusal(quota string, e *Error) *Error {
	e.Quota = quota
	return e
}

// CheckEndpointQuotas refuses a topology in which one of tenants has more
// endpoints than its max_endpoints quota (CodeQuotaExceeded), naming the
// tenant, the count and the cap. A change checks the tenants whose
// endpoints it adds, so that a cap lowered below what a tenant has keeps
// its endpoints and refuses only more.
func (t *Topology) CheckEndpointQuotas(tenants []string) error {
	var counts map[string]int
	for _, name := range tenants {
		max := t.Tenant(name).Quotas.MaxEndpoints
		if max <= 0 {
			continue
		}
		if counts == nil {
			counts = map[string]int{}
			for ep := range t.Endpoints {
				counts[TenantOf(ep)]++
			}
		}
		if n := counts[name]; n > max {
			return QuotaRefusal(QuotaMaxEndpoints, Errorf(CodeQuotaExceeded, "tenant %s would have %d endpoints, over its %s quota of %d", name, n, QuotaMaxEndpoints, max))
		}
	}
	return nil
}

// CheckQuotas decides whether an ingest that added added messages of
// addedBytes bytes to tenant, which then uses u, stays within q. An
// ingest that added nothing (every message existed) is never refused, so
// that a sender repeating a request is answered as before. Past MaxQueued
// it is CodeQuotaExceeded (429), past MaxBytes CodeStorageQuota (507); the
// message names the quota, its cap and the use.
func CheckQuotas(tenant string, q Quotas, u TenantUsage, added, addedBytes int64) error {
	switch {
	case added <= 0:
		return nil
	case q.MaxQueued > 0 && u.Queued > int64(q.MaxQueued):
		return QuotaRefusal(QuotaMaxQueued, Errorf(CodeQuotaExceeded, "tenant %s is over its %s quota: %d messages not yet finished, of %d, and this request adds %d",
			tenant, QuotaMaxQueued, u.Queued-added, q.MaxQueued, added))
	case q.MaxBytes > 0 && u.Bytes > q.MaxBytes && addedBytes > 0:
		return QuotaRefusal(QuotaMaxBytes, Errorf(CodeStorageQuota, "tenant %s is over its %s quota: %d bytes of messages not yet finished, of %d, and this request adds %d",
			tenant, QuotaMaxBytes, u.Bytes-addedBytes, q.MaxBytes, addedBytes))
	}
	return nil
}

// IngestTokens takes tokens of the tenants' ingest buckets.
type IngestTokens interface {
	// TakeTokens takes n tokens of tenant's bucket (refilled at rate,
	// holding burst at most) as TakeTokens decides at now. When it cannot,
	// it takes none and says how long until they are there (the
	// Retry-After of a refusal).
	TakeTokens(ctx context.Context, tenant string, rate Rate, burst, n int, now time.Time) (wait time.Duration, ok bool, err error)
}

// TokenBucket is a tenant's ingest bucket: Tokens at At. The zero bucket
// is full.
type TokenBucket struct {
	Tokens float64
	At     time.Time
}

// TakeTokens decides a take of n tokens at now from bucket b, refilled at
// rate up to burst (zero: rate.N): the bucket after it, or, when b has too
// few, ok false and how long until it has them. A take of more than burst
// waits for a full bucket and empties it, so that a batch larger than the
// burst is slowed, not refused for ever. An unlimited rate always takes.
func TakeTokens(b TokenBucket, rate Rate, burst, n int, now time.Time) (next TokenBucket, wait time.Duration, ok bool) {
	if rate.Unlimited() {
		return b, 0, true
	}
	if burst <= 0 {
		burst = rate.N
	}
	perNano := float64(rate.N) / float64(rate.Per)
	tokens := float64(burst)
	if !b.At.IsZero() {
		tokens = b.Tokens
		if elapsed := now.Sub(b.At); elapsed > 0 {
			tokens = math.Min(float64(burst), tokens+float64(elapsed)*perNano)
		}
	}
	want := float64(min(max(n, 0), burst))
	if tokens+1e-9 < want {
		return b, time.Duration(math.Ceil((want - tokens) / perNano)), false
	}
	at := now
	if b.At.After(now) {
		at = b.At // a clock behind the last taker's gives nothing back
	}
	return TokenBucket{Tokens: tokens - want, At: at}, 0, true
}

// TokenBuckets holds the tenants' ingest buckets in this process, for a
// store that one process uses (SQLite): where several nodes share a
// store, its SharedLimits hold them.
type TokenBuckets struct {
	mu      sync.Mutex
	buckets map[string]TokenBucket
}

var _ IngestTokens = (*TokenBuckets)(nil)

// TakeTokens takes n tokens of tenant's bucket, as TakeTokens decides.
func (t *TokenBuckets) TakeTokens(_ context.Context, tenant string, rate Rate, burst, n int, now time.Time) (time.Duration, bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	next, wait, ok := TakeTokens(t.buckets[tenant], rate, burst, n, now)
	if ok && !rate.Unlimited() {
		if t.buckets == nil {
			t.buckets = map[string]TokenBucket{}
		}
		t.buckets[tenant] = next
	}
	return wait, ok, nil
}
