// Package blobtest gives tests large payloads made as they are read, so
// that no test holds a large payload whole, their digests, and messages
// whose payload is such a blob in a real blob area.
package blobtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/blobdir"
)

// Area returns a blob area in a temporary directory of t.
func Area(t testing.TB) courier.Blobs {
	t.Helper()
	dir, err := blobdir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// Payload returns size bytes that look random, the same for the same seed,
// made as they are read.
func Payload(size int64, seed uint64) io.Reader {
	var key [32]byte
	key[0] = byte(seed)
	key[1] = byte(seed >> 8)
	return io.LimitReader(rand.NewChaCha8(key), size)
}

// Digest returns the hex SHA-256 of what r reads and its length.
func Digest(t testing.TB, r io.Reader) (string, int64) {
	t.Helper()
	sum := sha256.New()
	n, err := io.Copy(sum, r)
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(sum.Sum(nil)), n
}

// Message returns a message with id whose payload is a blob in blobs of
// size bytes from Payload(size, seed), with its Digest and Size set.
func Message(t testing.TB, blobs courier.Blobs, id string, size int, seed uint64) *courier.Message {
	t.Helper()
	w, err := blobs.Create(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	sum := sha256.New()
	if _, err := io.Copy(io.MultiWriter(w, sum), Payload(int64(size), seed)); err != nil {
		t.Fatal(err)
	}
	ref, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	return &courier.Message{ID: id, Type: "archive", ContentType: "application/octet-stream",
		Blob: ref, Size: size, Digest: hex.EncodeToString(sum.Sum(nil))}
}

// MissingRef is a well-formed ref that names no blob in any area.
const MissingRef = "00000000000000000000000000000000"

// Missing returns a message of size bytes whose blob is in no area.
func Missing(size int) *courier.Message {
	return &courier.Message{ID: "gone", Type: "archive", Blob: MissingRef, Size: size}
}

// UnreadableCase is a delivery whose payload a send cannot read from the
// store, and what the attempt's error says of it.
type UnreadableCase struct {
	Name    string
	Message *courier.Message
	Blobs   courier.Blobs
	Want    string
}

// UnreadableCases are the deliveries of a blob a send cannot read: one
// missing from its area, one sent without a blob area, and one shorter
// than stored, whose error says shortWant.
func UnreadableCases(t testing.TB, shortWant string) []UnreadableCase {
	t.Helper()
	blobs := Area(t)
	short := Message(t, blobs, "short", 2<<20, 3)
	short.Size += 10
	return []UnreadableCase{
		{"missing", Missing(2 << 20), blobs, "is not there"},
		{"no blob area", Missing(2 << 20), nil, "keeps no payloads larger than"},
		{"shorter than stored", short, blobs, shortWant},
	}
}

// WantUnreadable fails the test unless res is the attempt of a blob the
// store could not give: a transport error that says so, and want.
func WantUnreadable(t testing.TB, res courier.Result, want string) {
	t.Helper()
	if res.Class != courier.ClassTransport || !strings.Contains(res.Error, "cannot read the payload from the store") ||
		!strings.Contains(res.Error, want) {
		t.Fatalf("result %+v; want a transport error that cannot read the payload from the store: %s", res, want)
	}
}
