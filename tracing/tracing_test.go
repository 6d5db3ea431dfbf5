package tracing_test

import (
	"context"
	"testing"

	"github.com/courier-gw/courier/tracing"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TestTraceParentRoundTrip checks the direct traceparent writer and reader
// against the propagator's.
func TestTraceParentRoundTrip(t *testing.T) {
	for _, tp := range []string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
	} {
		sc := tracing.Remote(tp)
		want := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp}))
		if !sc.Equal(want) {
			t.Errorf("Remote(%q) = %v, want %v", tp, sc, want)
		}
		if got := tracing.TraceParent(trace.ContextWithRemoteSpanContext(context.Background(), sc)); got != tp {
			t.Errorf("TraceParent of %q = %q", tp, got)
		}
	}
	for _, bad := range []string{"", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", "00-zzf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x"} {
		if tracing.Remote(bad).IsValid() {
			t.Errorf("Remote(%q) is valid", bad)
		}
	}
	if got := tracing.TraceParent(context.Background()); got != "" {
		t.Errorf("TraceParent without a span = %q, want empty", got)
	}
}

// TestOffInstallsNothing checks that without an endpoint, in the
// configuration or the environment, Setup leaves tracing off and the
// global tracer provider the no-op one.
func TestOffInstallsNothing(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	before := otel.GetTracerProvider()
	stop, err := tracing.Setup(context.Background(), tracing.Config{Sample: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer stop(context.Background())
	if tracing.On() {
		t.Error("tracing is on without an endpoint")
	}
	if otel.GetTracerProvider() != before {
		t.Error("a tracer provider was installed without an endpoint")
	}
	if _, span := tracing.Tracer().Start(context.Background(), "x"); span.IsRecording() {
		t.Error("the tracer records with tracing off")
	}
}
