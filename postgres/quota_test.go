package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

// Three nodes ingesting a tenant's messages at once, singly and in pairs,
// store as many as its cap of messages not yet finished, not one more:
// each ingest of the tenant counts under the tenant's lock.
func TestQueuedCapAcrossNodes(t *testing.T) {
	ctx := context.Background()
	const limit = 50
	stores := nodes(t, 3)
	for _, s := range stores {
		s.SetTenantQuotas(map[string]courier.Quotas{"acme": {MaxQueued: limit}})
	}
	var refused, n atomic.Int64
	var wg sync.WaitGroup
	for _, s := range stores {
		for g := range 3 {
			wg.Go(func() {
				for range 15 {
					var msgs []*courier.Message
					for range 1 + g%2 {
						m := &courier.Message{ID: courier.QualifyID("acme", fmt.Sprint(n.Add(1))), Type: "t", Route: "acme/r",
							Payload: []byte(`{}`), ContentType: "application/json"}
						courier.Accept(m, courier.DefaultPolicy(), false, time.Now())
						msgs = append(msgs, m)
					}
					_, err := s.Ingest(ctx, msgs)
					switch courier.ErrorCode(err) {
					case "":
					case courier.CodeQuotaExceeded:
						refused.Add(1)
					default:
						t.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	page, err := stores[0].Messages(ctx, courier.MessageFilter{Tenant: "acme", Limit: courier.MaxListLimit})
	if err != nil {
		t.Fatal(err)
	}
	use, err := stores[1].TenantUsage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d of %d messages stored, %d ingests refused", len(page.Messages), n.Load(), refused.Load())
	if len(page.Messages) < limit-1 || len(page.Messages) > limit {
		t.Fatalf("%d messages stored against a cap of %d", len(page.Messages), limit)
	}
	if len(use) != 1 || use[0].Queued != int64(len(page.Messages)) {
		t.Fatalf("TenantUsage %+v, want acme's %d", use, len(page.Messages))
	}
}

// Three nodes taking a tenant's ingest tokens at once, each caller coming
// back when told, take the burst and the rate over the time they take, not
// more, and within 10 % of it.
func TestIngestRateAcrossNodes(t *testing.T) {
	ctx := context.Background()
	rate, burst := courier.Rate{N: 50, Per: time.Second}, 10
	const run = 2 * time.Second
	stores := nodes(t, 3)
	var taken atomic.Int64
	start := time.Now()
	var last atomic.Int64 // when the last token was taken, from start
	var wg sync.WaitGroup
	for _, s := range stores {
		for range 3 {
			wg.Go(func() {
				for time.Since(start) < run {
					wait, ok, err := s.TakeTokens(ctx, "acme", rate, burst, 1, time.Now())
					if err != nil {
						t.Error(err)
						return
					}
					if ok {
						taken.Add(1)
						at := int64(time.Since(start))
						for prev := last.Load(); at > prev && !last.CompareAndSwap(prev, at); prev = last.Load() {
						}
						continue
					}
					time.Sleep(wait)
				}
			})
		}
	}
	wg.Wait()
	span := time.Duration(last.Load())
	allowed := float64(burst) + float64(rate.N)*span.Seconds()
	got := float64(taken.Load())
	t.Logf("%v tokens taken in %v by 9 callers on 3 nodes; the bucket allows %.1f (%.1f %%)", got, span, allowed, 100*got/allowed)
	if got > allowed+1 {
		t.Fatalf("%v tokens taken, more than the %.1f the bucket allows", got, allowed)
	}
	if got < 0.9*allowed {
		t.Fatalf("%v tokens taken, less than 90 %% of the %.1f the bucket allows", got, allowed)
	}
}
