package api

import (
	"context"
	"errors"
	"math"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	courier "github.com/courier-gw/courier"
)

// limiter holds one token bucket per key, by name: it holds at most N
// tokens and gains N per Per, and a request takes one token per message. A
// request that finds a token goes through even when it takes more (a
// batch), leaving the bucket in debt: the average rate holds, and a batch
// larger than the bucket is not refused for ever. A key whose rate changes
// on reload starts with a full bucket.
type limiter struct {
	mu   sync.Mutex
	keys map[string]keyLimit
}

// keyLimit is a key's bucket and the rate it was made for.
type keyLimit struct {
	rate courier.Rate
	lim  *rate.Limiter
}

func (l *limiter) take(k *Key, now time.Time, n int) error {
	if k == nil || k.Rate.Unlimited() {
		return nil
	}
	l.mu.Lock()
	kl, ok := l.keys[k.Name]
	if !ok || kl.rate != k.Rate {
		if l.keys == nil {
			l.keys = map[string]keyLimit{}
		}
		kl = keyLimit{k.Rate, rate.NewLimiter(rate.Limit(float64(k.Rate.N)/k.Rate.Per.Seconds()), k.Rate.N)}
		l.keys[k.Name] = kl
	}
	// The first token decides; the rest of a batch is taken as debt, in
	// reservations of at most a bucket since rate refuses larger ones.
	first := kl.lim.ReserveN(now, 1)
	wait := first.DelayFrom(now)
	if wait > 0 {
		first.CancelAt(now)
	} else {
		for left := n - 1; left > 0; left -= k.Rate.N {
			kl.lim.ReserveN(now, min(left, k.Rate.N))
		}
	}
	l.mu.Unlock()
	if wait == 0 {
		return nil
	}
	return limitedError{
		err:   courier.Errorf(courier.CodeRateLimited, "key %q may send %s; try again in %s", k.Name, k.Rate, wait.Round(time.Millisecond)),
		after: wait,
	}
}

// takeTenant takes n tokens of the ingest bucket of the request's tenant,
// when its quotas give it an ingest rate: a tenant without one costs a
// map lookup. A refusal is 429 with the Retry-After of the tokens' return.
func (s *Server) takeTenant(ctx context.Context, tenant string, n int, now time.Time) error {
	tn := s.topology.Load().Tenants[tenant]
	if tn == nil || tn.Quotas.IngestRate.Unlimited() {
		return nil
	}
	q := tn.Quotas
	wait, ok, err := s.opts.IngestTokens.TakeTokens(ctx, tenant, q.IngestRate, q.Burst, n, now)
	switch {
	case err != nil:
		return err
	case ok:
		return nil
	}
	le := limitedError{
		err: courier.QuotaRefusal(courier.QuotaIngestRate, courier.Errorf(courier.CodeRateLimited, "tenant %s is over its ingest_rate quota of %s; try again in %s",
			tenant, q.IngestRate, wait.Round(time.Millisecond))),
		after: wait,
	}
	s.noteRefusal(tenant, le)
	return le
}

// limitedError is a refusal that says, in Retry-After, when to try again.
type limitedError struct {
	err   *courier.Error
	after time.Duration
}

func (e limitedError) Error() string { return e.err.Error() }
func (e limitedError) Unwrap() error { return e.err }

// retryAfter is the Retry-After value of err, in whole seconds rounded up
// (at least 1), or "" when err does not say.
func retryAfter(err error) string {
	var le limitedError
	if !errors.As(err, &le) {
		return ""
	}
	return strconv.FormatInt(max(1, int64(math.Ceil(le.after.Seconds()))), 10)
}

// suspendedRetry is the Retry-After of a key whose suspended messages are
// at their cap: an operator has to act, which takes minutes, not seconds.
const suspendedRetry = time.Minute

// checkSuspended refuses ingest by a key that has as many suspended
// messages as its cap, so that the suspended queue cannot be filled by one
// sender that keeps sending what cannot be delivered.
func (s *Server) checkSuspended(ctx context.Context, k *Key) error {
	if k == nil || k.MaxSuspended <= 0 {
		return nil
	}
	n, err := s.opts.Store.CountSuspended(ctx, k.Name, k.MaxSuspended)
	if err != nil {
		return err
	}
	if n < k.MaxSuspended {
		return nil
	}
	return limitedError{
		err: courier.Errorf(courier.CodeRateLimited, "key %q has %d suspended messages, its limit (max_suspended): "+
			"new messages are refused until an operator resubmits or discards some", k.Name, n),
		after: suspendedRetry,
	}
}
