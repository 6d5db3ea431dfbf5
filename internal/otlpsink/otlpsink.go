// Package otlpsink is an OTLP/HTTP trace receiver on loopback for tests
// and benchmarks: it decodes the official protobufs of each export and
// keeps the spans, or only counts them.
package otlpsink

import (
	"compress/gzip"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Sink is a running receiver. Its methods are safe for concurrent use.
type Sink struct {
	srv       *http.Server
	url       string
	countOnly bool

	mu      sync.Mutex
	spans   []*tracepb.Span
	count   int
	exports int
	changed chan struct{}
}

// Start listens on a free loopback port. With countOnly it keeps no span,
// only their number, counted on the wire without decoding the spans.
func Start(countOnly bool) (*Sink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Sink{url: "http://" + ln.Addr().String(), countOnly: countOnly, changed: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", s.export)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

// URL is the receiver's base URL (spans go to its /v1/traces).
func (s *Sink) URL() string { return s.url }

// Close stops the receiver.
func (s *Sink) Close() { s.srv.Close() }

func (s *Sink) export(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltrace.ExportTraceServiceRequest
	n := 0
	if s.countOnly {
		// Counted on the wire, as a collector in its own process would
		// take the work of decoding off the benchmark's.
		n, err = countSpans(raw)
	} else {
		err = proto.Unmarshal(raw, &req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.count += n
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			s.count += len(ss.Spans)
			s.spans = append(s.spans, ss.Spans...)
		}
	}
	s.exports++
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// Spans returns the spans received so far (none with countOnly).
func (s *Sink) Spans() []*tracepb.Span {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*tracepb.Span(nil), s.spans...)
}

// Count is the number of spans received, and of the exports they came in.
func (s *Sink) Count() (spans, exports int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count, s.exports
}

// Wait waits until ok holds for the spans received, or ctx ends.
func (s *Sink) Wait(ctx context.Context, ok func([]*tracepb.Span) bool) error {
	for {
		s.mu.Lock()
		done, changed := ok(s.spans), s.changed
		s.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// countSpans counts the spans of an ExportTraceServiceRequest without
// decoding them: resource_spans (1) hold scope_spans (2), which hold
// spans (2).
func countSpans(b []byte) (int, error) {
	n := 0
	err := fields(b, 1, func(rs []byte) error {
		return fields(rs, 2, func(ss []byte) error {
			return fields(ss, 2, func([]byte) error { n++; return nil })
		})
	})
	return n, err
}

// fields calls f with each length-delimited field numbered num of the
// message b, skipping the others.
func fields(b []byte, num protowire.Number, f func([]byte) error) error {
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
		if n == num && typ == protowire.BytesType {
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return protowire.ParseError(l)
			}
			if err := f(v); err != nil {
				return err
			}
			b = b[l:]
			continue
		}
		l = protowire.ConsumeFieldValue(n, typ, b)
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
	}
	return nil
}
