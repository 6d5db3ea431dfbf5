package courier_test

import (
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/storetest"
)

// The buckets of one process pass the suite of the shared ones.
func TestTokenBuckets(t *testing.T) {
	storetest.RunIngestTokens(t, func(t *testing.T) courier.IngestTokens { return &courier.TokenBuckets{} })
}

// A taker whose clock is behind the last one's gets no tokens back for
// the difference, and a zero burst is the rate's N.
func TestTakeTokensClockBehind(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rate := courier.Rate{N: 2, Per: time.Second}
	b, _, ok := courier.TakeTokens(courier.TokenBucket{}, rate, 0, 2, t0)
	if !ok || b.Tokens != 0 || !b.At.Equal(t0) {
		t.Fatalf("take of 2 of a full bucket of the rate's 2: %+v, %v", b, ok)
	}
	if _, wait, ok := courier.TakeTokens(b, rate, 0, 1, t0.Add(-time.Second)); ok || wait != 500*time.Millisecond {
		t.Fatalf("take a second behind: %v, %v; want refused for 500ms", wait, ok)
	}
}

func TestCheckQuotas(t *testing.T) {
	q := courier.Quotas{MaxQueued: 10, MaxBytes: 1000}
	tests := []struct {
		name         string
		use          courier.TenantUsage
		added, bytes int64
		want         courier.Code
		says         string
	}{
		{"within", courier.TenantUsage{Queued: 10, Bytes: 1000}, 2, 20, "", ""},
		{"queued", courier.TenantUsage{Queued: 11, Bytes: 500}, 2, 20, courier.CodeQuotaExceeded, "max_queued quota: 9 messages not yet finished, of 10, and this request adds 2"},
		{"bytes", courier.TenantUsage{Queued: 5, Bytes: 1001}, 1, 100, courier.CodeStorageQuota, "max_bytes quota: 901 bytes"},
		{"nothing added", courier.TenantUsage{Queued: 50, Bytes: 5000}, 0, 0, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := courier.CheckQuotas("acme", q, tt.use, tt.added, tt.bytes)
			if got := courier.ErrorCode(err); got != tt.want || !strings.Contains(courier.ErrorMessage(err), tt.says) {
				t.Fatalf("got %v, want %q saying %q", err, tt.want, tt.says)
			}
		})
	}
}
