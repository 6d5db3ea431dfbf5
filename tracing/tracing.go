// Package tracing is courier's OpenTelemetry tracing: it installs a tracer
// provider exporting over OTLP/HTTP when the environment or the
// configuration asks for it, and otherwise leaves the global no-op in
// place, so that the spans of the rest of courier cost a check of On.
package tracing

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Name is the instrumentation scope of courier's spans.
const Name = "github.com/courier-gw/courier"

// Config says where spans go. With neither Endpoint nor the standard
// OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// variables set, tracing is off.
type Config struct {
	// Endpoint is the OTLP/HTTP collector's base URL (e.g.
	// http://otel:4318), to which /v1/traces is added as for
	// OTEL_EXPORTER_OTLP_ENDPOINT; the environment's variables take over
	// when it is empty.
	Endpoint string
	// Sample is the share of new traces recorded, 0 to 1 (the
	// configuration's default is 1); a trace the caller sampled (or not)
	// is followed as the caller decided.
	Sample float64
	// Service is the service.name resource attribute.
	Service string
}

var (
	on     atomic.Bool
	tracer atomic.Pointer[trace.Tracer]
)

func init() {
	t := trace.Tracer(noop.NewTracerProvider().Tracer(Name))
	tracer.Store(&t)
}

// On reports whether tracing is on: callers skip all span work when not.
func On() bool { return on.Load() }

// Tracer is courier's tracer: the no-op one while tracing is off.
func Tracer() trace.Tracer { return *tracer.Load() }

// Enabled reports whether cfg or the environment turn tracing on.
func Enabled(cfg Config) bool {
	return cfg.Endpoint != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup installs a tracer provider exporting to cfg's endpoint or the
// environment's, when either is set, and returns what flushes and stops it.
// When neither is, it installs nothing and the shutdown does nothing.
func Setup(ctx context.Context, cfg Config) (shutdown func(context.Context) error, err error) {
	if !Enabled(cfg) {
		return func(context.Context) error { return nil }, nil
	}
	var opts []otlptracehttp.Option
	if cfg.Endpoint != "" {
		opts = append(opts, otlptracehttp.WithEndpointURL(tracesURL(cfg.Endpoint)))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	service := cfg.Service
	if service == "" {
		service = "courier"
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.Sample))),
		sdktrace.WithResource(resourceOf(service)),
	)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t := trace.Tracer(tp.Tracer(Name))
	tracer.Store(&t)
	on.Store(true)
	return func(ctx context.Context) error {
		on.Store(false)
		t := trace.Tracer(noop.NewTracerProvider().Tracer(Name))
		tracer.Store(&t)
		return tp.Shutdown(ctx)
	}, nil
}

// tracesURL is where spans go for a collector's base URL: its
// /v1/traces, as for OTEL_EXPORTER_OTLP_ENDPOINT.
func tracesURL(endpoint string) string {
	if strings.HasSuffix(endpoint, "/v1/traces") {
		return endpoint
	}
	return strings.TrimSuffix(endpoint, "/") + "/v1/traces"
}

var traceContext = propagation.TraceContext{}

// Extract returns ctx carrying the caller's span of a request's
// traceparent header, or ctx itself when there is none.
func Extract(ctx context.Context, h http.Header) context.Context {
	return traceContext.Extract(ctx, propagation.HeaderCarrier(h))
}

// TraceParent is the W3C traceparent of ctx's span; empty when there is no
// valid one. It is written directly rather than through the propagator:
// every attempt sends one.
func TraceParent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	var b [55]byte // 00-<32 hex>-<16 hex>-<2 hex>
	tid, sid := sc.TraceID(), sc.SpanID()
	copy(b[:], "00-")
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{byte(sc.TraceFlags())})
	return string(b[:])
}

// Remote is the span context a stored traceparent names; invalid when it
// is empty or malformed.
func Remote(traceParent string) trace.SpanContext {
	if len(traceParent) != 55 || traceParent[:3] != "00-" || traceParent[35] != '-' || traceParent[52] != '-' {
		return trace.SpanContext{}
	}
	var c trace.SpanContextConfig
	var flags [1]byte
	if _, err := hex.Decode(c.TraceID[:], []byte(traceParent[3:35])); err != nil {
		return trace.SpanContext{}
	}
	if _, err := hex.Decode(c.SpanID[:], []byte(traceParent[36:52])); err != nil {
		return trace.SpanContext{}
	}
	if _, err := hex.Decode(flags[:], []byte(traceParent[53:55])); err != nil {
		return trace.SpanContext{}
	}
	c.TraceFlags, c.Remote = trace.TraceFlags(flags[0]), true
	return trace.NewSpanContext(c)
}

// Batch is the attribute of a claim's or a commit's size.
func Batch(n int) attribute.KeyValue { return attribute.Int("courier.batch.size", n) }
