package http

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"
	"time"

	"github.com/courier-gw/courier"
)

// bodySource is what one request carries: bytes in memory, or a blob that
// is read anew from the store's blob area for every request that carries
// it (a resend on a fresh connection, a redirect hop), so that a payload
// of any size is never whole in memory.
type bodySource struct {
	inline []byte
	blob   *blobSource // nil for a body in memory
}

// blobSource reads one message's blob.
type blobSource struct {
	ctx  context.Context // not canceled with the attempt's: a request under way runs to its outcome
	d    courier.Delivery
	size int
}

// open reads the blob from its start, until deadline at the latest.
func (b *blobSource) open(deadline time.Time) (*blobReader, error) {
	ctx, cancel := context.WithDeadline(b.ctx, deadline)
	r, err := b.d.OpenPayload(ctx)
	if err != nil {
		cancel()
		return nil, &payloadError{err: err}
	}
	return &blobReader{PayloadReader: courier.NewPayloadReader(r, int64(b.size)), r: r, cancel: cancel}, nil
}

// blobReader reads a blob into a request (see courier.PayloadReader) and
// lets go of it when the request is done.
type blobReader struct {
	*courier.PayloadReader
	r      io.ReadCloser
	cancel context.CancelFunc
}

// Close lets go of the blob.
func (b *blobReader) Close() error {
	defer b.cancel()
	return b.r.Close()
}

// payloadError is a failure to read the payload from the store: never the
// receiver's fault, and nothing sent to it says otherwise.
type payloadError struct{ err error }

func (e *payloadError) Error() string {
	return "cannot read the payload from the store: " + e.err.Error()
}

func (e *payloadError) Unwrap() error { return e.err }

// asPayloadError returns the *payloadError in err's chain, if any.
func asPayloadError(err error) (*payloadError, bool) {
	var perr *payloadError
	ok := errors.As(err, &perr)
	return perr, ok
}

// payloadResult is the Result of an attempt that could not read its
// payload. The store is at fault, not the receiver, so the class is
// transport: transient, and by default no mark against the endpoint's
// health.
func payloadResult(err *payloadError) courier.Result {
	return courier.Result{Class: courier.ClassTransport, Error: err.Error()}
}

// newMAC returns the HMAC of a Standard Webhooks signature with the key of
// secret, after id and ts: what is left to write is the body.
func newMAC(secret, id, ts string) (hash.Hash, error) {
	key, err := signingKey(secret)
	if err != nil {
		return nil, err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	return mac, nil
}

// writeSignature appends the "v1,<base64>" entry of mac to b.
func writeSignature(b *strings.Builder, mac hash.Hash) {
	if b.Len() > 0 {
		b.WriteByte(' ')
	}
	b.WriteString("v1,")
	b.WriteString(base64.StdEncoding.EncodeToString(mac.Sum(nil)))
}

// signBlob is sign for a blob: one pass over it, within timeout, feeds the
// HMAC of every secret, before the request reads it again as its body.
func signBlob(secrets []string, id, ts string, blob *blobSource, timeout time.Duration) (string, error) {
	macs := make([]io.Writer, len(secrets))
	for i, s := range secrets {
		mac, err := newMAC(s, id, ts)
		if err != nil {
			return "", fmt.Errorf("secret %d: %w", i+1, err)
		}
		macs[i] = mac
	}
	r, err := blob.open(time.Now().Add(timeout))
	if err != nil {
		return "", err
	}
	defer r.Close()
	if _, err := io.Copy(io.MultiWriter(macs...), r); err != nil {
		return "", &payloadError{err: err}
	}
	var b strings.Builder
	for _, mac := range macs {
		writeSignature(&b, mac.(hash.Hash))
	}
	return b.String(), nil
}
