package engine_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/sink"
)

// kneeReceiver answers in base up to knee requests at once and then
// proportionally slower (it serves knee at a time, the others queue), and
// with 429 at once past full.
func kneeReceiver(base time.Duration, knee, full int) func(open int) sink.Step {
	return func(open int) sink.Step {
		if open > full {
			return sink.Respond(429)
		}
		return sink.Delay(base*time.Duration(max(open, knee))/time.Duration(knee), 204)
	}
}

// autoEndpoint is an endpoint on the sink's path /name with
// max_concurrency: auto up to ceiling, and a route of the same name to it.
// A 429 neither suspends it nor counts towards suspension: the limit is to
// deal with it, and the messages refused are retried every 10 ms.
func (h *harness) autoEndpoint(name string, ceiling int) {
	ep := h.httpEndpoint(name, "/"+name)
	ep.AutoConcurrency, ep.MaxConcurrency = true, ceiling
	ep.SuspendOn = []courier.ErrorClass{courier.ClassDNS, courier.ClassConnectRefused, courier.ClassTLS}
	h.top.Endpoints[name] = ep
	h.route(name, name)
	h.policy(steadyPolicy(name, 1000, 10*time.Millisecond))
}

// sendMany ingests n messages of the route's type to the route in one go.
func (h *harness) sendMany(route string, n int) []string {
	h.t.Helper()
	ids := make([]string, n)
	msgs := make([]*courier.Message, n)
	now := time.Now()
	for i := range msgs {
		ids[i] = fmt.Sprintf("%s-%d", route, i)
		msgs[i] = &courier.Message{ID: ids[i], Type: route, Route: route, Payload: []byte(`{}`), ContentType: "application/json"}
		courier.Accept(msgs[i], h.top.Policy(route), false, now)
	}
	if _, err := h.store.Ingest(context.Background(), msgs); err != nil {
		h.t.Fatal(err)
	}
	h.engine.Due([]string{route})
	return ids
}

// watchLimit samples the endpoint's concurrency limit every 10 ms until
// every message is delivered (or a minute passes), and returns the samples.
func (h *harness) watchLimit(endpoint string, ids []string) []int {
	h.t.Helper()
	var limits []int
	deadline := time.Now().Add(time.Minute)
	for {
		limits = append(limits, h.engine.ConcurrencyLimit(endpoint))
		if len(limits)%20 == 0 {
			n, err := h.store.CountQueued(context.Background(), []string{endpoint})
			if err != nil {
				h.t.Fatal(err)
			}
			if n == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("the messages were not delivered within a minute; limits seen %v", limits)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, id := range []string{ids[0], ids[len(ids)-1]} {
		h.waitState(id, courier.StateDelivered)
	}
	return limits
}

// Against a receiver whose latency rises past 20 requests at once and which
// refuses past 40, the limit settles in a saw tooth whose top is the
// refusal: the samples of the second half of the run (the first is slow
// start finding the knee) lie between 15 and 48, and the receiver refuses
// few requests. The top may pass 40 by a few: the attempts in flight lag the
// limit by the claims on their way (more on PostgreSQL, and on a loaded
// machine), so the receiver sees 41 open only after the limit has passed it.
func TestAutoConcurrencySettlesBelowTheKnee(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a receiver for a few seconds")
	}
	h := newHarness(t, func(h *harness) {
		h.autoEndpoint("knee", 64)
		// Answers of 100 ms, so that a busy machine's scheduling delays
		// (tens of ms) do not pass for the receiver's latency rising:
		// with 20 ms, they cut the limit below the knee.
		h.sink.ScriptLoad("/knee", kneeReceiver(100*time.Millisecond, 20, 40))
	})
	ids := h.sendMany("knee", 1500)
	limits := h.watchLimit("knee", ids)
	settled := limits[len(limits)/2:]
	outside := slices.DeleteFunc(slices.Clone(settled), func(l int) bool { return l >= 15 && l <= 48 })
	if len(outside) > len(settled)/10 {
		t.Fatalf("%d of %d samples of the limit in the second half outside 15..48: %v", len(outside), len(settled), settled)
	}
	if refused, total := h.sink.StatusCount(429), h.sink.Total(); refused*20 > total {
		t.Fatalf("the receiver refused %d of %d requests, more than one in 20", refused, total)
	}
	if got := h.sink.MaxConcurrent("/knee"); got > 64 {
		t.Fatalf("%d requests open at once, past the ceiling of 64", got)
	}
	t.Logf("limit in the second half: %v; 429s: %d of %d requests", span(settled), h.sink.StatusCount(429), h.sink.Total())
}

// Against a receiver whose latency stays flat, the limit climbs to its
// ceiling and the receiver gets that many requests at once.
func TestAutoConcurrencyClimbsToTheCeiling(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.autoEndpoint("fast", 32)
		// 100 ms, like the knee's receiver: a busy machine's delays must
		// not look like the latency rising.
		h.sink.Script("/fast", sink.Delay(100*time.Millisecond, 204), sink.Repeat)
	})
	if got := h.engine.ConcurrencyLimit("fast"); got != 8 {
		t.Fatalf("limit %d before any attempt, want the starting 8", got)
	}
	ids := h.sendMany("fast", 1000)
	limits := h.watchLimit("fast", ids)
	// It reaches the ceiling; a stall of this machine long enough to look
	// like rising latency may cut it for a while, but not far.
	if got := slices.Max(limits); got != 32 {
		t.Fatalf("limit at most %d while 1000 messages were delivered at flat latency, want the ceiling 32; seen %v", got, limits)
	}
	if got := h.engine.ConcurrencyLimit("fast"); got < 24 {
		t.Fatalf("limit %d after 1000 deliveries at flat latency, want near the ceiling 32; seen %v", got, limits)
	}
	if got := h.sink.MaxConcurrent("/fast"); got > 32 || got < 24 {
		t.Fatalf("%d requests open at once at the sink, want up to the ceiling of 32", got)
	}
}

func span(limits []int) string {
	return fmt.Sprintf("%d..%d", slices.Min(limits), slices.Max(limits))
}

// TestAutoConcurrencyRate measures the delivery rate against the receiver
// of TestAutoConcurrencySettlesBelowTheKnee with fixed limits and with
// auto: auto must come within 20 % of the best fixed limit. It takes half a
// minute, so it runs only when asked for:
//
//	COURIER_MEASURE=1 go test -run 'TestAutoConcurrencyRate' -v ./engine/
func TestAutoConcurrencyRate(t *testing.T) {
	// A rate on a shared machine is a measurement, not a check for every
	// run: it runs when asked for.
	if os.Getenv("COURIER_MEASURE") == "" {
		t.Skip("a measurement of half a minute: COURIER_MEASURE=1 go test -run TestAutoConcurrencyRate -v ./engine/")
	}
	const messages = 3000
	rate := func(t *testing.T, limit int) float64 {
		h := newHarness(t, func(h *harness) {
			h.autoEndpoint("knee", 64)
			if limit > 0 {
				h.top.Endpoints["knee"].AutoConcurrency, h.top.Endpoints["knee"].MaxConcurrency = false, limit
			}
			h.sink.ScriptLoad("/knee", kneeReceiver(20*time.Millisecond, 20, 40))
		})
		start := time.Now()
		h.watchLimit("knee", h.sendMany("knee", messages))
		return messages / time.Since(start).Seconds()
	}
	best, bestLimit := 0.0, 0
	for _, limit := range []int{10, 20, 30, 40, 64} {
		r := rate(t, limit)
		t.Logf("max_concurrency %d: %.0f deliveries/s", limit, r)
		if r > best {
			best, bestLimit = r, limit
		}
	}
	auto := rate(t, 0)
	t.Logf("max_concurrency auto: %.0f deliveries/s, %.0f %% of the best fixed limit (%d)", auto, 100*auto/best, bestLimit)
	if auto < 0.8*best {
		t.Fatalf("auto delivers %.0f/s, less than 80 %% of the %.0f/s of max_concurrency %d", auto, best, bestLimit)
	}
}
