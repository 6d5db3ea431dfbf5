package api

import (
	"context"
	"errors"
	"math"
	"strconv"
	"sync"
	"time"

	courier "github.com/courier-gw/courier"
)

// bucket is a token bucket of one key's ingest rate: it holds at most N
// tokens and gains N per Per. A request takes one token per message. A
// request that finds at least one token goes through even when it takes
// more (a batch), leaving the bucket in debt: the average rate holds, and a
// batch larger than the bucket is not refused for ever.
type bucket struct {
	rate   courier.Rate
	tokens float64
	at     time.Time
}

// take takes n tokens at now, or reports how long until a token is there.
func (b *bucket) take(now time.Time, n int) (bool, time.Duration) {
	perToken := float64(b.rate.Per) / float64(b.rate.N)
	capacity := float64(b.rate.N)
	if b.at.IsZero() {
		b.tokens = capacity
	} else if elapsed := now.Sub(b.at); elapsed > 0 {
		b.tokens = math.Min(capacity, b.tokens+float64(elapsed)/perToken)
	}
	if now.After(b.at) {
		b.at = now
	}
	if b.tokens < 1 {
		return false, time.Duration(math.Ceil((1 - b.tokens) * perToken))
	}
	b.tokens -= float64(n)
	return true, 0
}

// limiter holds the buckets of the keys by name; a key whose rate changes
// on reload starts with a full bucket.
type limiter struct {
	mu      sync.Mutex
	buckets map[string]*bucket
}

func (l *limiter) take(k *Key, now time.Time, n int) error {
	if k == nil || k.Rate.Unlimited() {
		return nil
	}
	l.mu.Lock()
	b := l.buckets[k.Name]
	if b == nil || b.rate != k.Rate {
		if l.buckets == nil {
			l.buckets = map[string]*bucket{}
		}
		b = &bucket{rate: k.Rate}
		l.buckets[k.Name] = b
	}
	ok, wait := b.take(now, n)
	l.mu.Unlock()
	if ok {
		return nil
	}
	return limitedError{
		err:   courier.Errorf(courier.CodeRateLimited, "key %q may send %s; try again in %s", k.Name, k.Rate, wait.Round(time.Millisecond)),
		after: wait,
	}
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
