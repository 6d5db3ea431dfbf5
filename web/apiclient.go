package web

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
)

// apiBase is where the dashboard's API requests say they go. They go to
// the handler in this process, never a network; the host is loopback's
// because without keys the API answers no other (the dashboard has checked
// the browser's request itself).
const apiBase = "http://localhost"

// client returns an API client that hands its requests to the API handler
// in this process, with the session's key, in the tenant the session acts
// in: a key that may see several tenants names the one chosen by the
// path's prefix (none for the default tenant), a tenant's key acts in its
// own without one.
func (h *Handler) client(s *session) *api.Client {
	c := api.NewClientWith(apiBase, s.secret, &http.Client{Transport: handlerTransport{h: h.api}})
	if s.switches() && s.tenant != courier.DefaultTenant {
		return c.InTenant(s.tenant)
	}
	return c
}

// handlerTransport answers requests with a handler, without a network.
type handlerTransport struct {
	h http.Handler
}

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body == nil {
		req.Body = http.NoBody
	}
	rec := &recorder{header: http.Header{}, status: http.StatusOK}
	t.h.ServeHTTP(rec, req)
	return &http.Response{
		Status: http.StatusText(rec.status), StatusCode: rec.status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: rec.header, Body: io.NopCloser(bytes.NewReader(rec.body.Bytes())), ContentLength: int64(rec.body.Len()),
		Request: req,
	}, nil
}

// recorder keeps a handler's answer.
type recorder struct {
	header http.Header
	status int
	wrote  bool
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if !r.wrote {
		r.status, r.wrote = status, true
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}

// bulkTimeout bounds how long the dashboard waits on a bulk operation it
// started; the operation itself goes on regardless.
const bulkTimeout = time.Hour

// detach returns a context for work that outlives the request, such as a
// bulk operation, bounded by bulkTimeout.
func detach(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), bulkTimeout)
}
