package api

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	courier "github.com/courier-gw/courier"
)

// Admission bounds the ingest requests this node works on at once
// (docs/design.md §7, Admission): the bytes of their bodies and the
// messages they carry. Memory follows the bytes in flight: a request is
// read whole, decoded and handed to the store, so that a flood of large
// batches would otherwise grow the heap far past the soft memory limit
// while the collector runs without pause and every request slows down.
type Admission struct {
	// MaxBytes bounds the bytes of the request bodies in flight; 0 is no
	// bound.
	MaxBytes int64
	// MaxMessages bounds the messages in flight (a batch counts its items);
	// 0 is no bound.
	MaxMessages int64
	// SenderShare is the part of each bound that one API key may hold,
	// between 0 and 1; 0 or 1 lets a key hold all of it. Without keys
	// every caller is the same sender and the share does not apply.
	SenderShare float64
}

// admissionRetry is the Retry-After of a refusal by Admission: the
// requests in flight take about that long to finish and free their room.
const admissionRetry = time.Second

// The reasons of a refusal by Admission, as AdmissionObserver is told.
const (
	RefusedBytes          = "bytes"           // the node's bytes in flight (503)
	RefusedMessages       = "messages"        // the node's messages in flight (503)
	RefusedSenderBytes    = "sender_bytes"    // the key's share of the bytes (429)
	RefusedSenderMessages = "sender_messages" // the key's share of the messages (429)
)

// AdmissionObserver is an Observer that is also told of each ingest
// request refused by Admission, by reason (RefusedBytes and the others).
// metrics.Metrics is one.
type AdmissionObserver interface {
	IngestRefused(reason string)
}

// admission counts what Admission bounds: what is in flight on the node
// and what each key holds of it.
type admission struct {
	limits Admission
	mu     sync.Mutex
	bytes  int64
	items  int64
	// senders holds what each key holds, while it holds any.
	senders map[string]*held
	// gauges mirror bytes and items for InFlight, read without the lock.
	gBytes, gItems atomic.Int64
	// now is the server's clock; left is when a request last left, in
	// Unix nanoseconds, for busy.
	now  func() time.Time
	left atomic.Int64
}

// busyGrace is how recently an admitted request must have finished for
// the store to count as busy with ingest rather than stuck (busy).
const busyGrace = 10 * time.Second

// busy reports whether ingest is in flight and the store finishes it: a
// request left within busyGrace. /readyz then holds through a slow ping,
// as the store is slow with the work admitted, not broken.
func (a *admission) busy() bool {
	b, n := a.gBytes.Load(), a.gItems.Load()
	return (b > 0 || n > 0) && a.now().Sub(time.Unix(0, a.left.Load())) < busyGrace
}

type held struct{ bytes, items int64 }

// ticket is one request's hold on the node's room, given back by leave.
type ticket struct {
	a      *admission
	sender string
	bytes  int64
	items  int64
}

// enter admits a request of sender that holds bytes and items, or returns
// the refusal to answer and its reason. A request is admitted whatever its
// size when nothing is in flight (on the node, or of its sender, for the
// share), so that one larger than a bound is not refused for ever.
func (a *admission) enter(sender string, bytes, items int64) (*ticket, string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := &ticket{a: a, sender: sender}
	if reason, err := a.check(sender, bytes, items); err != nil {
		return nil, reason, err
	}
	t.take(bytes, items)
	return t, "", nil
}

// add takes items more for a request already admitted: a batch's messages
// are counted when its list is read, as its length is not known before.
func (t *ticket) add(items int64) (string, error) {
	a := t.a
	a.mu.Lock()
	defer a.mu.Unlock()
	if reason, err := a.check(t.sender, 0, items); err != nil {
		return reason, err
	}
	t.take(0, items)
	return "", nil
}

// check decides, under a.mu, whether bytes and items more may enter for
// sender. A sender over its share is told so (429) before the node's
// bound is looked at: it is the one to slow down.
func (a *admission) check(sender string, bytes, items int64) (string, error) {
	l := a.limits
	if h := a.senders[sender]; h != nil && sender != "" && l.SenderShare > 0 && l.SenderShare < 1 {
		if share := int64(float64(l.MaxBytes) * l.SenderShare); bytes > 0 && l.MaxBytes > 0 && h.bytes > 0 && h.bytes+bytes > share {
			return RefusedSenderBytes, a.refusal(courier.CodeRateLimited, "key %q has %d bytes of ingest requests in flight on this node, its share is %d", sender, h.bytes, share)
		}
		if share := int64(float64(l.MaxMessages) * l.SenderShare); items > 0 && l.MaxMessages > 0 && h.items > 0 && h.items+items > share {
			return RefusedSenderMessages, a.refusal(courier.CodeRateLimited, "key %q has %d messages of ingest requests in flight on this node, its share is %d", sender, h.items, share)
		}
	}
	switch {
	case bytes > 0 && l.MaxBytes > 0 && a.bytes > 0 && a.bytes+bytes > l.MaxBytes:
		return RefusedBytes, a.refusal(courier.CodeUnavailable, "this node has %d bytes of ingest requests in flight, its bound is %d", a.bytes, l.MaxBytes)
	case items > 0 && l.MaxMessages > 0 && a.items > 0 && a.items+items > l.MaxMessages:
		return RefusedMessages, a.refusal(courier.CodeUnavailable, "this node has %d messages of ingest requests in flight, its bound is %d", a.items, l.MaxMessages)
	}
	return "", nil
}

func (a *admission) refusal(code courier.Code, format string, args ...any) error {
	return limitedError{err: courier.Errorf(code, format+"; try again in a second", args...), after: admissionRetry}
}

// take counts bytes and items more for t, under a.mu.
func (t *ticket) take(bytes, items int64) {
	a := t.a
	t.bytes += bytes
	t.items += items
	a.bytes += bytes
	a.items += items
	if t.sender != "" {
		h := a.senders[t.sender]
		if h == nil {
			if a.senders == nil {
				a.senders = map[string]*held{}
			}
			h = &held{}
			a.senders[t.sender] = h
		}
		h.bytes += bytes
		h.items += items
	}
	a.gBytes.Store(a.bytes)
	a.gItems.Store(a.items)
}

// leave gives back what t holds; a nil ticket holds nothing.
func (t *ticket) leave() {
	if t == nil {
		return
	}
	a := t.a
	a.mu.Lock()
	defer a.mu.Unlock()
	a.bytes -= t.bytes
	a.items -= t.items
	if h := a.senders[t.sender]; h != nil {
		h.bytes -= t.bytes
		h.items -= t.items
		if h.bytes <= 0 && h.items <= 0 {
			delete(a.senders, t.sender)
		}
	}
	t.bytes, t.items = 0, 0
	a.left.Store(a.now().UnixNano())
	a.gBytes.Store(a.bytes)
	a.gItems.Store(a.items)
}

// InFlight returns the bytes and the messages of the ingest requests this
// node has admitted and not yet answered.
func (s *Server) InFlight() (bytes, items int64) {
	return s.admission.gBytes.Load(), s.admission.gItems.Load()
}

// bodySize is what a request's body counts for Admission before it is
// read: its Content-Length, or limit when it has none (chunked) or is
// larger (then the read refuses it with 413). A body without a length is
// not admitted in steps as it arrives: a request that held part of the
// room and waited for more mid-body would hold its connection and its
// room with nothing to show for them, and could be refused only after
// its sender had sent part of it.
func bodySize(r *http.Request, limit int64) int64 {
	if r.ContentLength < 0 || r.ContentLength > limit {
		return limit
	}
	return r.ContentLength
}

// admitRequest enters an ingest request into Admission before its body
// is read, counted as bodySize with limit, or answers the refusal and
// returns false.
func (s *Server) admitRequest(w http.ResponseWriter, r *http.Request, limit, items int64) (*ticket, bool) {
	t, reason, err := s.admission.enter(senderOf(r), bodySize(r, limit), items)
	if err == nil {
		return t, true
	}
	s.refuseAdmission(w, r, reason, err, limit)
	return nil, false
}

// refuseAdmission answers a refusal by Admission and counts it. The answer
// goes out at once, before the body is read; the body still to come (at
// most limit bytes) is then read and thrown away, a buffer at a time, so
// that a sender that writes its whole body before it reads the answer
// gets the answer rather than a connection reset, and its connection
// stays usable. A sender that waits for 100 Continue sends no body: its
// connection closes after the answer. Without full duplex (HTTP/2) the
// stream ends with the answer.
func (s *Server) refuseAdmission(w http.ResponseWriter, r *http.Request, reason string, err error, limit int64) {
	if o, ok := s.opts.Observer.(AdmissionObserver); ok {
		o.IngestRefused(reason)
	}
	if r.ContentLength == 0 || r.ProtoMajor != 1 || strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		s.writeError(w, r, err)
		return
	}
	rc := http.NewResponseController(w)
	if rc.EnableFullDuplex() != nil {
		w.Header().Set("Connection", "close")
		s.writeError(w, r, err)
		return
	}
	// With its length, the answer is whole before the body is read.
	answer := &heldAnswer{ResponseWriter: w}
	s.writeError(answer, r, err)
	w.Header().Set("Content-Length", strconv.Itoa(answer.body.Len()))
	w.WriteHeader(answer.status)
	w.Write(answer.body.Bytes())
	if rc.Flush() == nil {
		io.CopyN(io.Discard, r.Body, limit+1) // more than limit: the server closes the connection
	}
}

// heldAnswer holds an answer's status and body, to be sent with its
// length; its header is the response's.
type heldAnswer struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (a *heldAnswer) WriteHeader(status int)      { a.status = status }
func (a *heldAnswer) Write(b []byte) (int, error) { return a.body.Write(b) }

// senderOf names the sender whose share Admission counts: the request's
// key, "" without keys.
func senderOf(r *http.Request) string {
	if k := keyOf(r); k != nil {
		return k.Name
	}
	return ""
}
