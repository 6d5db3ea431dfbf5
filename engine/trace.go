package engine

import (
	"context"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// LinkAfter is how long after its message's ingest an attempt still joins
// the ingest's trace as a child. A later attempt (a retry hours on, a
// resubmit days on) starts a trace of its own with a link to the ingest's:
// a trace that spans days is one no tracing backend shows well.
const LinkAfter = time.Hour

// startAttempt starts the span of an attempt of m on ep: a child of the
// span that ingested m, or, LinkAfter past its ingest, the root of a new
// trace linked to it. The context it returns carries the span, for the
// transport (which passes it on as traceparent) and the log. With tracing
// off it returns e.life and a nil span.
func (e *Engine) startAttempt(m *courier.Message, ep *courier.Endpoint) (context.Context, trace.Span) {
	if !tracing.On() {
		return e.life, nil
	}
	ctx := e.life
	var buf [6]attribute.KeyValue
	attrs := append(buf[:0], attribute.String("courier.message.id", m.Key()), attribute.String("courier.route", m.Route),
		attribute.String("courier.message.type", m.Type), attribute.Int("courier.attempt", m.TotalAttempts))
	if ep != nil {
		attrs = append(attrs, attribute.String("courier.endpoint", ep.Name), attribute.String("courier.transport", string(ep.Transport)))
	}
	opts := [4]trace.SpanStartOption{clientKind, trace.WithAttributes(attrs...)}
	n := 2
	if parent := tracing.Remote(m.TraceParent); parent.IsValid() {
		if e.clock.Now().Sub(m.CreatedAt) > LinkAfter {
			opts[2], opts[3], n = trace.WithNewRoot(), trace.WithLinks(trace.Link{SpanContext: parent}), 4
		} else {
			ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
		}
	}
	return tracing.Tracer().Start(ctx, "attempt", opts[:n]...)
}

// clientKind and internalKind are made once: every attempt and batch
// takes one.
var (
	clientKind   = trace.WithSpanKind(trace.SpanKindClient)
	internalKind = trace.WithSpanKind(trace.SpanKindInternal)
)

// endAttempt ends an attempt's span with what the attempt got.
func endAttempt(span trace.Span, res courier.Result) {
	if span == nil {
		return
	}
	if res.Delivered() {
		span.SetAttributes(attribute.Int("courier.status", res.Status))
	} else {
		span.SetAttributes(attribute.Int("courier.status", res.Status), attribute.String("courier.class", string(res.Class)))
		span.SetStatus(codes.Error, res.Error)
	}
	span.End()
}

// startBatch starts the span of a store call on n items (a claim, a
// commit of outcomes); nil with tracing off.
func startBatch(ctx context.Context, name string) trace.Span {
	if !tracing.On() {
		return nil
	}
	_, span := tracing.Tracer().Start(ctx, name, internalKind)
	return span
}

// endBatch ends a store call's span with the number of items it took.
func endBatch(span trace.Span, n int, err error) {
	if span == nil {
		return
	}
	span.SetAttributes(tracing.Batch(n))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
