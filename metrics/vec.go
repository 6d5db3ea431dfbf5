package metrics

import (
	"sync"
	"time"

	courier "github.com/courier-gw/courier"
)

// vec keeps the child of a labelled metric for each key, made once: a
// lookup is a map read under a read lock, with no allocation, where the
// client library's WithLabelValues would hash and check the label values
// on every call.
type vec[K comparable, V any] struct {
	mu       sync.RWMutex
	children map[K]V
	make     func(K) V
}

func newVec[K comparable, V any](make func(K) V) *vec[K, V] {
	return &vec[K, V]{children: map[K]V{}, make: make}
}

func (v *vec[K, V]) get(k K) V {
	v.mu.RLock()
	c, ok := v.children[k]
	v.mu.RUnlock()
	if ok {
		return c
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if c, ok = v.children[k]; !ok {
		c = v.make(k)
		v.children[k] = c
	}
	return c
}

// typeSet admits message types as label values up to max distinct ones;
// routes and endpoints are configured and so bounded, types are not.
type typeSet struct {
	mu   sync.RWMutex
	seen map[string]struct{}
	max  int
}

// label returns t, or OtherType once max other types have been seen.
func (s *typeSet) label(t string) string {
	s.mu.RLock()
	_, ok := s.seen[t]
	n := len(s.seen)
	s.mu.RUnlock()
	if ok {
		return t
	}
	if n >= s.max {
		return OtherType
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[string]struct{}{}
	}
	if len(s.seen) >= s.max {
		if _, ok := s.seen[t]; !ok {
			return OtherType
		}
	}
	s.seen[t] = struct{}{}
	return t
}

// minuteRing counts deliveries and failed attempts per minute over the
// last hour, on this node.
type minuteRing struct {
	mu      sync.Mutex
	buckets [60]minuteBucket
}

type minuteBucket struct {
	minute            int64 // Unix minute the counts belong to
	delivered, failed int
}

func (r *minuteRing) add(at time.Time, delivered, failed int) {
	minute := at.Unix() / 60
	r.mu.Lock()
	defer r.mu.Unlock()
	b := &r.buckets[minute%60]
	if b.minute != minute {
		*b = minuteBucket{minute: minute}
	}
	b.delivered += delivered
	b.failed += failed
}

// lastHour returns the 60 minutes up to and including now's, oldest first.
func (r *minuteRing) lastHour(now time.Time) []courier.MinuteStats {
	out := make([]courier.MinuteStats, 60)
	last := now.Unix() / 60
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range out {
		minute := last - 59 + int64(i)
		out[i].Start = time.Unix(minute*60, 0).UTC()
		if b := r.buckets[minute%60]; b.minute == minute {
			out[i].Delivered, out[i].Failed = b.delivered, b.failed
		}
	}
	return out
}
