package api

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"slices"
	"time"

	courier "github.com/courier-gw/courier"
	json "github.com/goccy/go-json"
	"github.com/google/uuid"
)

// singleLimit bounds the body of a one-message ingest: the payload may be
// base64 (4/3 larger) or escaped JSON, plus the other fields. A JSON body
// is read whole, so it is never larger than a batch may be: a larger
// payload comes as the raw body of a PUT (ingestRaw), streamed.
func (s *Server) singleLimit() int64 {
	return min(s.opts.MaxPayload*2, s.opts.MaxBatchBytes) + 64<<10
}

// handlePut takes in a message with the id of its path: an ingest request,
// or, with a Courier-Type header, the payload itself (ingestRaw).
func (s *Server) handlePut(w http.ResponseWriter, r *http.Request) {
	s.ingestOne(w, r, r.PathValue("id"), r.Header.Get(HeaderType) != "")
}

func (s *Server) handlePost(w http.ResponseWriter, r *http.Request) {
	s.ingestOne(w, r, "", false)
}

func (s *Server) ingestOne(w http.ResponseWriter, r *http.Request, pathID string, raw bool) {
	w, r, end := traceIngest(w, r, "ingest")
	if end != nil {
		defer end()
	}
	// Admission first, so that a refused request takes no tokens. A raw
	// payload larger than courier.InlineMax is streamed to a blob, through
	// buffers of no more than that.
	limit := s.singleLimit()
	if raw {
		limit = min(s.opts.MaxPayload, courier.InlineMax)
	}
	t, ok := s.admitRequest(w, r, limit, 1)
	if !ok {
		return
	}
	defer t.leave()
	k := keyOf(r)
	now := s.opts.Clock.Now()
	err := s.limits.take(k, now, 1)
	if err == nil {
		err = s.takeTenant(r.Context(), scopeOf(r).tenant, 1, now)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if raw {
		s.ingestRaw(w, r, k, now, pathID)
		return
	}
	body, err := readBody(r, w, limit)
	if courier.ErrorCode(err) == courier.CodePayloadTooLarge {
		err = courier.Errorf(courier.CodePayloadTooLarge, "%s; a larger payload is sent as the body itself of PUT /v1/messages/{id} with a %s header", courier.ErrorMessage(err), HeaderType)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	holds := blobHolds{}
	defer holds.close()
	msgs, err := s.decodeMessage(r.Context(), body, pathID, now, holds)
	if err == nil {
		if err = s.admit(r.Context(), k, msgs); err != nil {
			holds.abort(msgs[0])
		}
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	switch s.store(w, r, msgs, now, holds) {
	case notStored:
		holds.abort(msgs[0])
	case unknown:
		holds.closeLater()
	}
}

// stored is what an ingest came to, for the blobs of its messages.
type stored int

const (
	created   stored = iota // stored: its blob is kept
	notStored               // there already, or refused: its new blob goes
	unknown                 // the store failed: it may still be stored
)

// store ingests one message (the deliveries of a published one) and
// answers: 201 with the message as a read would show it, 200 with the
// stored one when it was there with the same content, else 409. It
// reports what came of it.
func (s *Server) store(w http.ResponseWriter, r *http.Request, msgs []*courier.Message, now time.Time, holds blobHolds) stored {
	m := msgs[0]
	stampTrace(r, msgs)
	res, err := s.opts.Store.Ingest(r.Context(), msgs)
	if err != nil {
		s.writeError(w, r, err)
		return unknown
	}
	if res[0].Status == courier.IngestConflict && holds.sameAsBefore(m, res[0].Message) {
		res[0].Status = courier.IngestExists
	}
	if res[0].Status == courier.IngestExists && res[0].Message.Sender != m.Sender {
		res[0].Status = courier.IngestConflict // another key's message: not to be shown
	}
	switch res[0].Status {
	case courier.IngestCreated:
		var due []string
		for _, d := range msgs {
			s.opts.Observer.Ingested(d)
			if d.NextAttemptAt.After(now) {
				s.opts.ScheduledFunc(d.Route, d.NextAttemptAt)
			} else if !slices.Contains(due, d.Route) {
				due = append(due, d.Route)
			}
		}
		if len(due) > 0 {
			s.opts.DueFunc(due)
		}
		// As a read would show it: due, or waiting for its key.
		v := toPublished(msgs, s.topology.Load(), false)
		v.WaitingFor = s.waitingFor(r, m)
		sc := scopeOf(r)
		sc.showMessage(&v)
		w.Header().Set("Location", sc.path("/v1/messages/"+v.ID))
		writeJSON(w, http.StatusCreated, v)
		return created
	case courier.IngestExists:
		stored := []*courier.Message{res[0].Message}
		if m.Subscription != "" {
			if stored, err = s.opts.Store.Deliveries(r.Context(), m.ID); err != nil {
				s.writeError(w, r, err)
				return notStored
			}
		}
		v := toPublished(stored, s.topology.Load(), false)
		scopeOf(r).showMessage(&v)
		writeJSON(w, http.StatusOK, v)
	default:
		s.writeError(w, r, conflictError(m.ID))
	}
	return notStored
}

// admit checks what the sending key may do with a decoded message (its
// deliveries, when it is published) and marks it as the key's. The
// suspended cap is checked here, after the cheap checks, as it costs a
// query.
func (s *Server) admit(ctx context.Context, k *Key, msgs []*courier.Message) error {
	if k == nil {
		return nil
	}
	if err := own(k, msgs); err != nil {
		return err
	}
	return s.checkSuspended(ctx, k)
}

// own checks that key k may send to the route of each of msgs (the
// deliveries of a published message go to its subscriptions' routes) and
// marks them as the key's.
func own(k *Key, msgs []*courier.Message) error {
	for _, m := range msgs {
		if err := checkRoute(k, m.Route); err != nil {
			return err
		}
		m.Sender = k.Name
	}
	return nil
}

// decodeMessage reads one ingest body and returns what to hand to
// Store.Ingest (the message, or the deliveries of a published one), or the
// error to answer.
func (s *Server) decodeMessage(ctx context.Context, body []byte, pathID string, now time.Time, holds blobHolds) ([]*courier.Message, error) {
	var req IngestRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, malformed("the body is not a valid ingest request: %v", jsonError(err))
	}
	if dec.More() {
		return nil, malformed("the body has data after the JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, malformed("the body has data after the JSON object")
	}
	return s.requestToMessage(ctx, &req, pathID, now, holds)
}

func (s *Server) requestToMessage(ctx context.Context, req *IngestRequest, pathID string, now time.Time, holds blobHolds) ([]*courier.Message, error) {
	hasJSON := len(req.Payload) > 0 && string(req.Payload) != "null"
	hasB64 := req.PayloadBase64 != nil
	if hasJSON == hasB64 {
		return nil, malformed("give exactly one of payload and payload_base64")
	}
	m := &courier.Message{
		ID:          req.ID,
		Type:        req.Type,
		Route:       req.Route,
		ContentType: req.ContentType,
		Headers:     req.Headers,
		OrderingKey: req.OrderingKey,
		Recipient:   req.Recipient,
	}
	if pathID != "" {
		if req.ID != "" && req.ID != pathID {
			return nil, courier.Errorf(courier.CodeInvalidArgument, "the id in the body (%q) differs from the id in the path (%q)", req.ID, pathID)
		}
		m.ID = pathID
	}
	if hasJSON {
		m.Payload = []byte(req.Payload)
		if m.ContentType == "" {
			m.ContentType = "application/json"
		}
	} else {
		p, err := base64.StdEncoding.DecodeString(*req.PayloadBase64)
		if err != nil {
			return nil, malformed("payload_base64 is not valid base64: %v", err)
		}
		m.Payload = p // with no content type, Admit makes it application/octet-stream
	}
	if req.Priority != nil {
		m.Priority = *req.Priority
	}
	if req.DeliverAfter != nil {
		m.DeliverAfter = *req.DeliverAfter
	}
	if req.ExpiresAt != nil {
		if req.ExpiresAt.IsZero() {
			// A message's zero expiry means none; given, it is a time long past.
			return nil, courier.Errorf(courier.CodeInvalidArgument, "expires_at %s is in the past", req.ExpiresAt.Format(time.RFC3339))
		}
		m.ExpiresAt = *req.ExpiresAt
	}
	if len(m.Payload) > courier.InlineMax && int64(len(m.Payload)) <= s.opts.MaxPayload {
		if err := holds.spill(ctx, s.opts.Store.Blobs(), m); err != nil {
			return nil, err
		}
	}
	in := courier.Intake{MaxPayload: s.opts.MaxPayload, PriorityGiven: req.Priority != nil, NewIDFunc: newMessageID,
		Tenant: scopeIn(ctx).tenant}
	msgs, err := s.topology.Load().Admit(m, in, now)
	if err != nil {
		holds.abort(m)
	}
	return msgs, err
}

// blobHolds are the blobs written for the payloads of an ingest's JSON
// messages that are larger than courier.InlineMax, held by their spools
// (by ref) until the messages are stored, so that every payload that
// large is a blob, whichever way it came.
type blobHolds map[string]*heldBlob

// heldBlob is the spool of a payload written to a blob, and the hash its
// message would have had kept in the row, as a message that large was
// before blobs.
type heldBlob struct {
	*courier.Spool
	inline string
}

// sameAsBefore reports whether stored, which m's ingest found under m's id
// with other content, is m as stored before payloads that large were
// blobs: then it is a repeat, not a conflict.
func (h blobHolds) sameAsBefore(m, stored *courier.Message) bool {
	held := h[m.Blob]
	return m.Blob != "" && held != nil && stored != nil && stored.Digest == "" && stored.Hash == held.inline
}

// spill writes m's payload to a new blob and puts it on m.
func (h blobHolds) spill(ctx context.Context, blobs courier.Blobs, m *courier.Message) error {
	// As Admit would hash it: its content type defaulted first.
	c := *m
	c.ContentType = cmp.Or(c.ContentType, "application/octet-stream")
	inline := courier.ContentHash(&c)
	sp := courier.NewSpool(ctx, blobs, 0)
	if _, err := sp.Write(m.Payload); err != nil {
		sp.Close()
		if errors.Is(err, courier.ErrPayloadTooLarge) {
			return courier.ErrBlobsUnavailable
		}
		return err
	}
	if err := sp.Finish(m); err != nil {
		sp.Close()
		return err
	}
	h[m.Blob] = &heldBlob{sp, inline}
	return nil
}

// abort removes the blob of m, which was not stored.
func (h blobHolds) abort(m *courier.Message) {
	if sp := h[m.Blob]; m.Blob != "" && sp != nil {
		sp.Abort()
	}
}

// close lets go of every blob not let go of yet: those of the messages
// stored stay.
func (h blobHolds) close() {
	for _, sp := range h {
		sp.Close()
	}
}

// closeLater hands every blob to Spool.CloseLater, for an ingest whose
// outcome the store did not tell: close then has nothing left to do.
func (h blobHolds) closeLater() {
	for ref, sp := range h {
		sp.CloseLater()
		delete(h, ref)
	}
}

// newMessageID names a message sent without an id: a UUIDv7, so that ids
// sort by the time they were given.
func newMessageID() (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", err
	}
	return id.String(), nil
}

func (s *Server) handleBatch(w http.ResponseWriter, r *http.Request) {
	w, r, end := traceIngest(w, r, "ingest batch")
	if end != nil {
		defer end()
	}
	t, ok := s.admitRequest(w, r, s.opts.MaxBatchBytes, 0)
	if !ok {
		return
	}
	defer t.leave()
	var req BatchRequest
	if err := decodeBody(w, r, s.opts.MaxBatchBytes, &req, "a valid batch request"); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Messages == nil {
		s.writeError(w, r, malformed(`the body needs a "messages" list`))
		return
	}
	if len(req.Messages) > MaxBatchItems {
		s.writeError(w, r, courier.Errorf(courier.CodePayloadTooLarge, "a batch holds at most %d messages, not %d", MaxBatchItems, len(req.Messages)))
		return
	}
	if reason, err := t.add(int64(len(req.Messages))); err != nil {
		s.refuseAdmission(w, r, reason, err, s.opts.MaxBatchBytes)
		return
	}
	k := keyOf(r)
	sc := scopeOf(r)
	now := s.opts.Clock.Now()
	err := s.limits.take(k, now, len(req.Messages))
	if err == nil {
		err = s.takeTenant(r.Context(), sc.tenant, len(req.Messages), now)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.checkSuspended(r.Context(), k); err != nil {
		s.writeError(w, r, err)
		return
	}
	results := make([]BatchResult, len(req.Messages))
	holds := blobHolds{}
	defer holds.close()
	var msgs []*courier.Message
	var index []int // index[i] is the position of msgs[i] in the batch
	for i, raw := range req.Messages {
		// The item is decoded into its message: what it was is let go of
		// at once, so that a batch never holds its items twice.
		req.Messages[i] = nil
		ms, err := s.decodeMessage(r.Context(), raw, "", now, holds)
		if err == nil && k != nil {
			if err = own(k, ms); err != nil {
				holds.abort(ms[0])
			}
		}
		if err != nil {
			if courier.ErrorCode(err) == courier.CodeInternal {
				s.writeError(w, r, err)
				return
			}
			results[i] = BatchResult{ID: itemID(raw), Status: StatusOf(err), Error: errorInfo(err)}
			continue
		}
		msgs = append(msgs, ms...)
		for range ms {
			index = append(index, i)
		}
	}
	if len(msgs) > 0 {
		stampTrace(r, msgs)
		res, err := s.opts.Store.Ingest(r.Context(), msgs)
		if err != nil {
			holds.closeLater() // they may still be stored
			s.writeError(w, r, err)
			return
		}
		var due []string
		later := map[string]time.Time{} // the earliest of each route's messages due later
		for j, ir := range res {
			if ir.Status != courier.IngestCreated {
				holds.abort(msgs[j])
			}
			if ir.Status == courier.IngestConflict && holds.sameAsBefore(msgs[j], ir.Message) {
				ir.Status = courier.IngestExists
			}
			i := index[j]
			first := j == 0 || index[j-1] != i // the others are more deliveries of the same
			switch {
			case ir.Status == courier.IngestCreated:
				s.opts.Observer.Ingested(msgs[j])
				results[i] = BatchResult{ID: sc.showID(msgs[j].ID), Status: http.StatusCreated}
				r, at := msgs[j].Route, msgs[j].NextAttemptAt
				switch {
				case !at.After(now):
					if !slices.Contains(due, r) {
						due = append(due, r)
					}
				case later[r].IsZero() || at.Before(later[r]):
					later[r] = at
				}
			case !first:
			case ir.Status == courier.IngestExists:
				if ir.Message.Sender != msgs[j].Sender {
					err := conflictError(msgs[j].ID)
					results[i] = BatchResult{ID: sc.showID(msgs[j].ID), Status: StatusOf(err), Error: errorInfo(err)}
					break
				}
				results[i] = BatchResult{ID: sc.showID(msgs[j].ID), Status: http.StatusOK}
			default:
				err := conflictError(msgs[j].ID)
				results[i] = BatchResult{ID: sc.showID(msgs[j].ID), Status: StatusOf(err), Error: errorInfo(err)}
			}
		}
		if len(due) > 0 {
			s.opts.DueFunc(due)
		}
		for r, at := range later {
			s.opts.ScheduledFunc(r, at)
		}
	}
	writeJSON(w, http.StatusOK, BatchResponse{Results: results})
}

// itemID recovers the id of a batch item that failed to decode, so that its
// result can name it.
func itemID(raw json.RawMessage) string {
	var v struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(raw, &v) == nil && courier.ValidID(v.ID) {
		return v.ID
	}
	return ""
}
