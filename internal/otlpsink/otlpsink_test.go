package otlpsink

import (
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TestCountSpans checks the count on the wire against the request's spans.
func TestCountSpans(t *testing.T) {
	span := func(name string) *tracepb.Span {
		return &tracepb.Span{Name: name, TraceId: make([]byte, 16), SpanId: make([]byte, 8)}
	}
	req := &coltrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{
		{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{span("a"), span("b")}}, {Spans: []*tracepb.Span{span("c")}}}},
		{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{span("d")}}}},
	}}
	raw, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := countSpans(raw); err != nil || got != 4 {
		t.Errorf("countSpans = %d, %v; want 4", got, err)
	}
	if _, err := countSpans([]byte{0x0a, 0x05, 0x01}); err == nil {
		t.Error("countSpans of a truncated request: no error")
	}
}
