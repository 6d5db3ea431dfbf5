package tracing_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/engine"
	"github.com/courier-gw/courier/internal/otlpsink"
	"github.com/courier-gw/courier/internal/testkit/httpcheck"
	"github.com/courier-gw/courier/internal/testkit/sink"
	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
	"github.com/courier-gw/courier/internal/testkit/startstoptest"
	"github.com/courier-gw/courier/internal/testkit/syncbuf"
	"github.com/courier-gw/courier/tracing"
	httptransport "github.com/courier-gw/courier/transport/http"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// TestTraceFromSenderToReceiver ingests a message with a traceparent
// through the API and lets the engine deliver it to a real receiver: the
// spans exported to an OTLP receiver on loopback are of the caller's
// trace (the ingest's parent is the caller's span, the attempt's the
// ingest's), the receiver's request carries a traceparent of that trace,
// and the log lines of the delivery name it.
// traced is a tracing setup for one test: an OTLP receiver on loopback,
// an engine delivering to a real receiver, and the API in front of it.
type traced struct {
	collector *otlpsink.Sink
	receiver  *sink.Sink
	store     courier.Store
	srv       *httptest.Server
	logs      *syncbuf.Buffer
	flush     func() // stops tracing, so that every span goes out
}

func startTraced(t *testing.T) *traced {
	t.Helper()
	collector, err := otlpsink.Start(false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(collector.Close)
	stop, err := tracing.Setup(context.Background(), tracing.Config{Endpoint: collector.URL(), Sample: 1})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	flush := func() {
		if stopped {
			return
		}
		stopped = true
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := stop(ctx); err != nil {
			t.Errorf("tracing shutdown: %v", err)
		}
	}
	t.Cleanup(flush)
	if !tracing.On() {
		t.Fatal("tracing is off after Setup with an endpoint")
	}

	receiver := sink.MustStart(t, sink.Options{})
	store := sqlitetest.Open(t)
	top := &courier.Topology{
		Endpoints: map[string]*courier.Endpoint{"acme": {Name: "acme", Transport: courier.TransportHTTP, Timeout: 2 * time.Second,
			MaxConcurrency: 4, Settings: &httptransport.Settings{URL: receiver.URL() + "/in", Method: http.MethodPost}}},
		Routes:   map[string]*courier.Route{"acme": {Name: "acme", Endpoints: []string{"acme"}}},
		Policies: map[string]*courier.Policy{courier.DefaultPolicyName: courier.DefaultPolicy()},
	}
	top.Prepare()
	logs := &syncbuf.Buffer{}
	logger := slog.New(tracing.NewHandler(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	tr := httptransport.New(httptransport.Options{AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	t.Cleanup(tr.Close)
	eng := engine.New(engine.Options{Store: store, Topology: top, Logger: logger,
		Senders:      map[courier.Transport]courier.Sender{courier.TransportHTTP: tr},
		PollInterval: 20 * time.Millisecond, TimerInterval: 20 * time.Millisecond, RescueInterval: 50 * time.Millisecond})
	startstoptest.Start(t, eng)
	srv := httptest.NewServer(api.NewServer(api.Options{Store: store, Topology: top, Logger: logger, DueFunc: eng.Due}))
	t.Cleanup(srv.Close)
	return &traced{collector: collector, receiver: receiver, store: store, srv: srv, logs: logs, flush: flush}
}

func TestTraceFromSenderToReceiver(t *testing.T) {
	tt := startTraced(t)
	collector, receiver, store, srv, logs, flush := tt.collector, tt.receiver, tt.store, tt.srv, tt.logs, tt.flush
	const callerTrace, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	req, err := http.NewRequest(http.MethodPut, srv.URL+"/v1/messages/inv-1",
		strings.NewReader(`{"type":"invoice","route":"acme","payload":{"total":42}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	httpcheck.Expect(t, nil, req, http.StatusCreated)
	m, err := store.Message(context.Background(), "inv-1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.TraceParent, "00-"+callerTrace+"-") || strings.Contains(m.TraceParent, callerSpan) {
		t.Errorf("stored trace parent %q, want the ingest span's of trace %s", m.TraceParent, callerTrace)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := receiver.Wait(ctx, "/in", 1); err != nil {
		t.Fatalf("the receiver got nothing: %v", err)
	}
	got := receiver.Arrivals("/in")[0].Header.Get("traceparent")
	parts := strings.Split(got, "-")
	if len(parts) != 4 || parts[1] != callerTrace {
		t.Fatalf("receiver's traceparent %q, want one of trace %s", got, callerTrace)
	}
	delivered := func() bool {
		m, err := store.Message(context.Background(), "inv-1")
		return err == nil && m.State == courier.StateDelivered
	}
	for !delivered() {
		if ctx.Err() != nil {
			t.Fatal("the message is not delivered")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The engine's line of the delivery names the trace.
	for !strings.Contains(logs.String(), "message delivered") {
		if ctx.Err() != nil {
			t.Fatalf("no delivery logged:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "message delivered") && !strings.Contains(line, "trace_id="+callerTrace) {
			t.Errorf("delivery logged without its trace: %s", line)
		}
	}
	flush() // every span goes out

	byName := map[string][]*tracepb.Span{}
	for _, s := range collector.Spans() {
		byName[s.Name] = append(byName[s.Name], s)
	}
	ingest, attempt := only(t, byName, "ingest"), only(t, byName, "attempt")
	if id := hex.EncodeToString(ingest.TraceId); id != callerTrace {
		t.Errorf("ingest span of trace %s, want %s", id, callerTrace)
	}
	if id := hex.EncodeToString(ingest.ParentSpanId); id != callerSpan {
		t.Errorf("ingest span's parent %s, want the caller's span %s", id, callerSpan)
	}
	if id := hex.EncodeToString(attempt.TraceId); id != callerTrace {
		t.Errorf("attempt span of trace %s, want %s", id, callerTrace)
	}
	if !bytes.Equal(attempt.ParentSpanId, ingest.SpanId) {
		t.Errorf("attempt span's parent %x, want the ingest span %x", attempt.ParentSpanId, ingest.SpanId)
	}
	if want := hex.EncodeToString(attempt.SpanId); parts[2] != want {
		t.Errorf("receiver's traceparent names span %s, want the attempt's %s", parts[2], want)
	}
	attrs := map[string]string{}
	for _, kv := range attempt.Attributes {
		attrs[kv.Key] = strings.Trim(kv.Value.String(), " ")
	}
	for _, k := range []string{"courier.endpoint", "courier.route", "courier.attempt", "courier.status"} {
		if attrs[k] == "" {
			t.Errorf("attempt span has no %s: %v", k, attrs)
		}
	}
	for _, name := range []string{"claim", "commit outcomes"} {
		if len(byName[name]) == 0 {
			t.Errorf("no %q span", name)
		}
	}
}

// only returns the one span of a name.
func only(t *testing.T, byName map[string][]*tracepb.Span, name string) *tracepb.Span {
	t.Helper()
	if n := len(byName[name]); n != 1 {
		t.Fatalf("%d %q spans, want 1 (spans: %v)", n, name, names(byName))
	}
	return byName[name][0]
}

func names(byName map[string][]*tracepb.Span) []string {
	var out []string
	for n, ss := range byName {
		out = append(out, n+"×"+string(rune('0'+min(len(ss), 9))))
	}
	return out
}

// TestLateAttemptLinksToItsIngest: an attempt more than engine.LinkAfter
// after its message's ingest (a retry hours on, a resubmit days on) starts
// a trace of its own, linked to the ingest's, and the receiver gets that
// new trace.
func TestLateAttemptLinksToItsIngest(t *testing.T) {
	tt := startTraced(t)
	const ingestTrace, ingestSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	m := &courier.Message{ID: "old-1", Type: "invoice", Route: "acme", Payload: []byte("{}"), ContentType: "application/json",
		TraceParent: "00-" + ingestTrace + "-" + ingestSpan + "-01"}
	// Ingested long ago, as far as the message says, and due now.
	courier.Accept(m, courier.DefaultPolicy(), false, time.Now().Add(-engine.LinkAfter-time.Hour))
	m.NextAttemptAt = time.Now()
	if _, err := tt.store.Ingest(context.Background(), []*courier.Message{m}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := tt.receiver.Wait(ctx, "/in", 1); err != nil {
		t.Fatalf("the receiver got nothing: %v", err)
	}
	got := strings.Split(tt.receiver.Arrivals("/in")[0].Header.Get("traceparent"), "-")
	for { // the attempt's span ends with its outcome
		if m, err := tt.store.Message(ctx, "old-1"); err == nil && m.State == courier.StateDelivered {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the message is not delivered")
		}
		time.Sleep(10 * time.Millisecond)
	}
	tt.flush()
	byName := map[string][]*tracepb.Span{}
	for _, s := range tt.collector.Spans() {
		byName[s.Name] = append(byName[s.Name], s)
	}
	attempt := only(t, byName, "attempt")
	if id := hex.EncodeToString(attempt.TraceId); id == ingestTrace || len(attempt.ParentSpanId) != 0 {
		t.Errorf("late attempt of trace %s with parent %x; want a new trace, a root span", id, attempt.ParentSpanId)
	}
	if len(attempt.Links) != 1 || hex.EncodeToString(attempt.Links[0].TraceId) != ingestTrace || hex.EncodeToString(attempt.Links[0].SpanId) != ingestSpan {
		t.Errorf("late attempt's links %v, want one to the ingest's span %s of trace %s", attempt.Links, ingestSpan, ingestTrace)
	}
	if len(got) != 4 || got[1] != hex.EncodeToString(attempt.TraceId) {
		t.Errorf("receiver's traceparent %v, want the late attempt's trace %x", got, attempt.TraceId)
	}
}
