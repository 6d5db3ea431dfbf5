package courier

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"
)

// InlineMax is the largest payload a store keeps in its rows. A larger one
// is a blob: streamed to the store's blob area as it comes in and out, never
// whole in memory. It is the largest payload there was before blobs, so that
// a message stored then hashes as it did.
const InlineMax = 1 << 20

// MaxPayloadCeiling is the highest max_payload may be set to: 1 GiB.
const MaxPayloadCeiling = 1 << 30

// Blobs keeps the payloads larger than InlineMax, beside a store: files next
// to a SQLite database, large objects or a directory for PostgreSQL, or an
// S3-compatible bucket for either. A
// blob is written whole and made durable before the message that refers to
// it is stored, and is removed by Sweep once no message refers to it (after
// the retention purge took its message, or when its upload was cut off).
// Every method is safe for concurrent use, also by several processes
// sharing the area.
type Blobs interface {
	// Create starts a new blob.
	Create(ctx context.Context) (BlobWriter, error)
	// Open reads a blob from its start. A blob that is not there is an
	// error with CodeNotFound.
	Open(ctx context.Context, ref string) (io.ReadCloser, error)
	// Sweep removes every blob that no writer holds and that referenced
	// does not report as referred to by a stored message, and reports how
	// many it removed.
	Sweep(ctx context.Context, referenced func(ctx context.Context, refs []string) (map[string]bool, error)) (int, error)
	// Remove removes a blob that no stored message refers to any more
	// (its message's payload was erased, Store.Erase); one that is not
	// there is no error.
	Remove(ctx context.Context, ref string) error
	// Usage reports how many blobs there are (written or being written)
	// and their bytes.
	Usage(ctx context.Context) (n int, size int64, err error)
}

// BlobWriter writes one blob. Until Close, the blob is held: no Sweep removes
// it, so that the message referring to it can be stored after Commit. Close
// without Commit, or after Abort, leaves nothing behind.
type BlobWriter interface {
	io.Writer
	// Commit makes what was written durable and returns the blob's ref.
	Commit() (ref string, err error)
	// Abort removes the blob, committed or not (its message was not stored).
	Abort() error
	// Close ends the writer and lets go of the blob.
	Close() error
}

// ErrBlobsUnavailable is the CodeUnavailable error of a store that keeps
// no blob area.
var ErrBlobsUnavailable = Errorf(CodeUnavailable, "this store keeps no payloads larger than %d bytes", InlineMax)

// HasBlob reports whether m's payload is a blob rather than Payload.
func (m *Message) HasBlob() bool { return m.Blob != "" }

// PayloadSize is the length of m's payload, inline or a blob.
func (m *Message) PayloadSize() int {
	if m.Blob != "" || m.Digest != "" {
		return m.Size // a blob, or only its digest (NewDigestSpool)
	}
	return len(m.Payload)
}

// OpenPayload returns m's payload from its start: Payload, or its blob from
// blobs.
func (m *Message) OpenPayload(ctx context.Context, blobs Blobs) (io.ReadCloser, error) {
	if m.Erased != nil {
		return nil, ErasedError(m)
	}
	if m.Blob == "" {
		return io.NopCloser(bytes.NewReader(m.Payload)), nil
	}
	if blobs == nil {
		return nil, ErrBlobsUnavailable
	}
	return blobs.Open(ctx, m.Blob)
}

// ReadPayload returns m's payload in memory, or an error with
// CodePayloadTooLarge when it is over limit bytes. It is for what cannot
// stream: a broker's message, a workflow's envelope.
func (m *Message) ReadPayload(ctx context.Context, blobs Blobs, limit int64) ([]byte, error) {
	if m.Erased != nil {
		return nil, ErasedError(m)
	}
	if size := m.PayloadSize(); int64(size) > limit {
		return nil, Errorf(CodePayloadTooLarge, "the payload of %d bytes is over the %d bytes this can carry", size, limit)
	}
	if m.Blob == "" {
		return m.Payload, nil
	}
	r, err := m.OpenPayload(ctx, blobs)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err == nil && int64(len(b)) != int64(m.Size) {
		err = Errorf(CodeInternal, "the blob of message %s has %d bytes, not the %d stored", m.ID, len(b), m.Size)
	}
	return b, err
}

// PayloadReader reads a payload of a known size into a sender's request,
// and keeps what went wrong on the reading side, so that a sender tells a
// payload its store could not give (Err) from a receiver that did not take
// it. A payload longer or shorter than its size is an error: a request's
// Content-Length and signature are that size's.
type PayloadReader struct {
	r       io.Reader
	size, n int64
	err     error
}

// NewPayloadReader returns a PayloadReader of r, which should give size
// bytes.
func NewPayloadReader(r io.Reader, size int64) *PayloadReader {
	return &PayloadReader{r: r, size: size}
}

func (b *PayloadReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.n += int64(n)
	switch {
	case b.n > b.size:
		b.err = fmt.Errorf("the payload is longer than the %d bytes stored", b.size)
		return n, b.err
	case errors.Is(err, io.EOF) && b.n < b.size:
		b.err = fmt.Errorf("the payload ended after %d of the %d bytes stored", b.n, b.size)
		return n, b.err
	case err != nil && !errors.Is(err, io.EOF):
		b.err = err
	}
	return n, err
}

// Err is what went wrong reading the payload; nil if nothing did.
func (b *PayloadReader) Err() error { return b.err }

// PayloadDigest returns the hex SHA-256 of a payload, as Message.Digest holds it.
func PayloadDigest(p []byte) string {
	sum := sha256.Sum256(p)
	return hex.EncodeToString(sum[:])
}

// Spool takes a payload in as it is read: up to InlineMax it stays in
// memory, beyond that it goes on to a blob, so that a payload of any size
// takes a bounded amount of memory. It counts and hashes what it takes.
type Spool struct {
	ctx   context.Context
	blobs Blobs
	limit int64 // the most it takes; 0 for no limit

	buf      []byte
	w        BlobWriter
	n        int64
	digest   hash.Hash
	hashOnly bool // past InlineMax, count and hash but keep nothing
	spilled  bool
	// idHash, when set, also takes every byte: a received item's derived
	// id is made of it (NewItemSpool).
	idHash hash.Hash
}

// ErrPayloadTooLarge is what a Spool's Write returns past its limit.
var ErrPayloadTooLarge = errors.New("payload too large")

// NewSpool returns a Spool that takes at most limit bytes (0: any), using
// blobs (nil: none, so that a payload over InlineMax is refused as too
// large for this store).
func NewSpool(ctx context.Context, blobs Blobs, limit int64) *Spool {
	return &Spool{ctx: ctx, blobs: blobs, limit: limit, digest: sha256.New()}
}

// NewDigestSpool returns a Spool that takes at most limit bytes (0: any) and
// keeps a payload up to InlineMax, but of a larger one only its digest and
// size: enough to compare a repeated ingest with the stored message
// without storing the payload again.
func NewDigestSpool(limit int64) *Spool {
	return &Spool{limit: limit, digest: sha256.New(), hashOnly: true}
}

// Write takes the next part of the payload.
func (s *Spool) Write(p []byte) (int, error) {
	if s.limit > 0 && s.n+int64(len(p)) > s.limit {
		return 0, ErrPayloadTooLarge
	}
	s.n += int64(len(p))
	s.digest.Write(p)
	if s.idHash != nil {
		s.idHash.Write(p)
	}
	if !s.spilled && len(s.buf)+len(p) <= InlineMax {
		s.buf = append(s.buf, p...)
		return len(p), nil
	}
	if s.hashOnly {
		s.spilled, s.buf = true, nil
		return len(p), nil
	}
	if s.w == nil {
		if s.blobs == nil {
			return 0, ErrPayloadTooLarge
		}
		w, err := s.blobs.Create(s.ctx)
		if err != nil {
			return 0, err
		}
		s.w, s.spilled = w, true
		if _, err := w.Write(s.buf); err != nil {
			return 0, err
		}
		s.buf = nil
	}
	if _, err := s.w.Write(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Size is the bytes taken so far.
func (s *Spool) Size() int64 { return s.n }

// Finish puts the payload taken on m: Payload when it stayed in memory,
// else Blob (committed, still held), Digest and Size.
func (s *Spool) Finish(m *Message) error {
	if s.hashOnly && s.spilled {
		m.Payload, m.Blob, m.Digest, m.Size = nil, "", hex.EncodeToString(s.digest.Sum(nil)), int(s.n)
		return nil
	}
	if s.w == nil {
		m.Payload = s.buf
		if m.Payload == nil {
			m.Payload = []byte{}
		}
		return nil
	}
	ref, err := s.w.Commit()
	if err != nil {
		return err
	}
	m.Payload, m.Blob, m.Digest, m.Size = nil, ref, hex.EncodeToString(s.digest.Sum(nil)), int(s.n)
	return nil
}

// Abort removes the blob taken, if any: its message was not stored.
func (s *Spool) Abort() error {
	if s.w == nil {
		return nil
	}
	return s.w.Abort()
}

// Close lets go of the blob (kept if Finish committed it and Abort was not
// called): call it once the message that refers to it is stored, or not.
func (s *Spool) Close() error {
	if s.w == nil {
		return nil
	}
	return s.w.Close()
}

// IngestSettle is how long a write handed to a store may still commit after
// its caller was told of an error (a timeout, a lost connection): a store
// may finish a write its caller gave up on. A variable for tests.
var IngestSettle = time.Minute

// CloseLater lets go of the blob only after IngestSettle, for a message
// whose Ingest failed: it may still be stored, and until the store can no
// longer commit it no sweep may take its blob. Neither stored nor removed
// meanwhile, the blob is then kept or swept as the store says.
func (s *Spool) CloseLater() {
	if s.w == nil {
		return
	}
	time.AfterFunc(IngestSettle, func() { s.w.Close() })
}
