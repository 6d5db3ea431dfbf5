package api

import (
	"net/http"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// traceIngest starts the span of an ingest request, a child of the
// caller's span when the request has a traceparent, and returns the
// request and the writer to go on with: they carry the span, so that what
// is logged of the request names its trace. With tracing off it returns
// them as they are and a nil end.
func traceIngest(w http.ResponseWriter, r *http.Request, name string) (http.ResponseWriter, *http.Request, func()) {
	if !tracing.On() {
		return w, r, nil
	}
	ctx := tracing.Extract(r.Context(), r.Header)
	ctx, span := tracing.Tracer().Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("http.route", r.Pattern)))
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	return sw, r.WithContext(ctx), func() {
		span.SetAttributes(attribute.Int("http.response.status_code", sw.status))
		if sw.status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(sw.status))
		}
		span.End()
	}
}

// stampTrace gives msgs the trace context of r's span, so that their
// attempts continue the trace.
func stampTrace(r *http.Request, msgs []*courier.Message) {
	if !tracing.On() {
		return
	}
	tp := tracing.TraceParent(r.Context())
	for _, m := range msgs {
		m.TraceParent = tp
	}
	trace.SpanFromContext(r.Context()).SetAttributes(attribute.Int("courier.messages", len(msgs)))
}

// statusWriter notes the status written, for the span.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the writer beneath.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
