package api

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	courier "github.com/courier-gw/courier"
)

// The headers of an ingest whose body is the payload itself (a PUT with
// HeaderType): the fields the JSON form has, but for the payload and its
// content type, which are the body and Content-Type.
const (
	HeaderType         = "Courier-Type"
	HeaderRoute        = "Courier-Route"
	HeaderOrderingKey  = "Courier-Ordering-Key"
	HeaderPriority     = "Courier-Priority"
	HeaderDeliverAfter = "Courier-Deliver-After"
	HeaderExpiresAt    = "Courier-Expires-At"
	HeaderRecipient    = "Courier-Recipient"
	// HeaderPrefix starts a header of the message: Courier-Header-X-Tenant
	// gives it the header X-Tenant.
	HeaderPrefix = "Courier-Header-"
	// HeaderSHA256 is the hex SHA-256 of a payload served raw.
	HeaderSHA256 = "Courier-Content-Sha256"
)

// ingestRaw takes in one message whose body is its payload, streamed: up to
// courier.InlineMax in memory, beyond it to the store's blob area as it is
// read, so that a payload of up to max_payload (1 GiB at most) never is
// whole in memory. The content hash is taken while the body streams, and
// the answer (201) comes only once the payload and the message are on
// stable storage. A repeat of a message that exists is only hashed, not
// stored again, and answered 200 (or 409 when its content differs).
func (s *Server) ingestRaw(w http.ResponseWriter, r *http.Request, k *Key, now time.Time, id string) {
	m, err := rawMessage(r.Header, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if r.ContentLength > s.opts.MaxPayload {
		s.writeError(w, r, tooLarge(r.ContentLength, s.opts.MaxPayload))
		return
	}
	var spool *courier.Spool
	if r.ContentLength >= 0 && r.ContentLength <= courier.InlineMax {
		spool = courier.NewSpool(r.Context(), nil, s.opts.MaxPayload)
	} else if s.exists(r.Context(), scopeOf(r).id(id)) {
		spool = courier.NewDigestSpool(s.opts.MaxPayload)
	} else {
		spool = courier.NewSpool(r.Context(), s.opts.Store.Blobs(), s.opts.MaxPayload)
	}
	closeNow := true
	defer func() {
		if closeNow {
			spool.Close()
		}
	}()
	if err := readInto(spool, w, r, s.opts.MaxPayload); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := spool.Finish(m); err != nil {
		s.writeError(w, r, err)
		return
	}
	in := courier.Intake{MaxPayload: s.opts.MaxPayload, PriorityGiven: r.Header.Get(HeaderPriority) != "", NewIDFunc: newMessageID,
		Tenant: scopeOf(r).tenant}
	msgs, err := s.topology.Load().Admit(m, in, now)
	if err == nil {
		err = s.admit(r.Context(), k, msgs)
	}
	if err != nil {
		spool.Abort()
		s.writeError(w, r, err)
		return
	}
	if m.Digest != "" && m.Blob == "" {
		// Only hashed: the id exists, so this is a repeat (200) or a
		// conflict (409); should the message have gone meanwhile, the
		// sender is asked to send it again.
		msgs, err = s.opts.Store.Deliveries(r.Context(), m.ID)
		if err != nil {
			if courier.ErrorCode(err) == courier.CodeNotFound {
				err = courier.Errorf(courier.CodeUnavailable, "message %q went while its repeat was read: send it again", m.ID)
			}
			s.writeError(w, r, err)
			return
		}
		if msgs[0].Hash != m.Hash || msgs[0].Sender != m.Sender {
			s.writeError(w, r, conflictError(m.ID))
			return
		}
		v := toPublished(msgs, s.topology.Load(), false)
		scopeOf(r).showMessage(&v)
		writeJSON(w, http.StatusOK, v)
		return
	}
	switch s.store(w, r, msgs, now, nil) {
	case notStored:
		spool.Abort() // there already, or refused: the new blob goes
	case unknown:
		closeNow = false
		spool.CloseLater()
	}
}

// exists reports whether a message (or a published one) with id is stored.
// A failed read says no: the ingest then goes the long way, and Ingest
// still finds a repeat.
func (s *Server) exists(ctx context.Context, id string) bool {
	_, err := s.opts.Store.Deliveries(ctx, id)
	return err == nil
}

// readInto copies a request body into a spool, turning its failures into
// the answers they call for: 413 past the limit, 400 for a body cut short,
// and the spool's own (503 when the blob area cannot take it).
func readInto(spool *courier.Spool, w http.ResponseWriter, r *http.Request, limit int64) error {
	_, err := io.CopyBuffer(spool, idleBody(w, r), make([]byte, 256<<10))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, courier.ErrPayloadTooLarge):
		return tooLarge(spool.Size(), limit)
	case courier.ErrorCode(err) != courier.CodeInternal || r.Context().Err() != nil:
		return err // the blob area's, with its code
	default:
		return malformed("reading the request body: %v", err)
	}
}

func tooLarge(size, limit int64) error {
	return courier.Errorf(courier.CodePayloadTooLarge, "the payload of %d bytes or more is over max_payload: the limit is %d bytes", size, limit)
}

// rawMessage reads the fields of a raw ingest from its headers.
func rawMessage(h http.Header, id string) (*courier.Message, error) {
	m := &courier.Message{
		ID:          id,
		Type:        h.Get(HeaderType),
		Route:       h.Get(HeaderRoute),
		ContentType: h.Get("Content-Type"),
		OrderingKey: h.Get(HeaderOrderingKey),
		Recipient:   h.Get(HeaderRecipient),
	}
	if v := h.Get(HeaderPriority); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil {
			return nil, courier.Errorf(courier.CodeInvalidArgument, "header %s: %q is not a whole number", HeaderPriority, v)
		}
		m.Priority = p
	}
	for _, t := range []struct {
		header string
		dst    *time.Time
	}{{HeaderDeliverAfter, &m.DeliverAfter}, {HeaderExpiresAt, &m.ExpiresAt}} {
		v := h.Get(t.header)
		if v == "" {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return nil, courier.Errorf(courier.CodeInvalidArgument, "header %s: %q is not an RFC 3339 time", t.header, v)
		}
		if at.IsZero() && t.header == HeaderExpiresAt {
			return nil, courier.Errorf(courier.CodeInvalidArgument, "header %s: %s is in the past", t.header, v)
		}
		*t.dst = at
	}
	for name, values := range h {
		if len(name) <= len(HeaderPrefix) || !strings.EqualFold(name[:len(HeaderPrefix)], HeaderPrefix) {
			continue
		}
		if len(values) > 1 {
			return nil, courier.Errorf(courier.CodeInvalidArgument, "header %s is given %d times", name, len(values))
		}
		if m.Headers == nil {
			m.Headers = map[string]string{}
		}
		m.Headers[name[len(HeaderPrefix):]] = values[0]
	}
	return m, nil
}

// handlePayload serves a message's payload as it was given, streamed, with
// its content type, length and SHA-256: the way to read a payload too large
// to show inside the JSON of a message.
func (s *Server) handlePayload(w http.ResponseWriter, r *http.Request) {
	msgs, err := s.opts.Store.Deliveries(r.Context(), scopeOf(r).id(r.PathValue("id")))
	if err == nil && !ownsMessage(r, msgs[0]) {
		err = hiddenNotFound(r.PathValue("id"))
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if _, size, err := s.servePayload(w, r, msgs[0]); err != nil && size == 0 {
		s.writeError(w, r, err)
	}
}

// streamIdle is how long a payload streamed in or out may go without moving
// a byte before it is cut off. The server's read and write timeouts bound a
// whole request, too short for a gigabyte on a slow line; a stream is given
// time as long as it moves.
const streamIdle = time.Minute

// servePayload answers with m's payload, streamed, with its Content-Type,
// Content-Length and SHA-256 (HeaderSHA256 and Repr-Digest), and reports
// how many bytes of how many it sent. When it could not start, it has
// written nothing and returns 0, 0 and why.
func (s *Server) servePayload(w http.ResponseWriter, r *http.Request, m *courier.Message) (sent, size int64, err error) {
	body, err := m.OpenPayload(r.Context(), s.opts.Store.Blobs())
	if err != nil {
		return 0, 0, err
	}
	defer body.Close()
	size = int64(m.PayloadSize())
	digest := m.PayloadSHA256()
	h := w.Header()
	h.Set("Content-Type", cmp.Or(m.ContentType, "application/octet-stream"))
	h.Set("Content-Length", strconv.FormatInt(size, 10))
	h.Set(HeaderSHA256, digest)
	if sum, err := hex.DecodeString(digest); err == nil {
		h.Set("Repr-Digest", "sha-256=:"+base64.StdEncoding.EncodeToString(sum)+":")
	}
	// A sender's bytes, never a page of this origin: a browser that opens
	// the URL (of a claim check, say) saves it and runs nothing in it.
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Disposition", "attachment")
	h.Set("Content-Security-Policy", "sandbox; default-src 'none'")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return 0, size, nil
	}
	rc := http.NewResponseController(w)
	sent, err = io.CopyBuffer(writerFunc(func(p []byte) (int, error) {
		// A writer that keeps no deadline (a test's recorder) has none to move.
		_ = rc.SetWriteDeadline(time.Now().Add(streamIdle))
		return w.Write(p)
	}), body, make([]byte, 256<<10))
	return sent, size, err
}

// idleBody is a request body whose reads move the connection's read
// deadline on by streamIdle, so that an upload may take as long as it
// keeps moving.
func idleBody(w http.ResponseWriter, r *http.Request) io.Reader {
	rc := http.NewResponseController(w)
	return readerFunc(func(p []byte) (int, error) {
		_ = rc.SetReadDeadline(time.Now().Add(streamIdle))
		return r.Body.Read(p)
	})
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

type readerFunc func(p []byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }
