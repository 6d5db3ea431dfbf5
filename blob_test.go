package courier_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/blobdir"
)

func spoolAll(t *testing.T, sp *courier.Spool, payload []byte) error {
	t.Helper()
	for p := payload; len(p) > 0; {
		n := min(len(p), 64<<10)
		if _, err := sp.Write(p[:n]); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// spoolWhole spools payload whole through sp and finishes m with it.
func spoolWhole(t *testing.T, sp *courier.Spool, payload []byte, m *courier.Message) {
	t.Helper()
	if err := spoolAll(t, sp, payload); err != nil {
		t.Fatal(err)
	}
	if err := sp.Finish(m); err != nil {
		t.Fatal(err)
	}
}

// mustBlobDir opens a blob area in a directory of its own.
func mustBlobDir(t *testing.T) *blobdir.Dir {
	t.Helper()
	dir, err := blobdir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestSpool(t *testing.T) {
	ctx := context.Background()
	dir := mustBlobDir(t)
	for _, tc := range []struct {
		name     string
		size     int
		limit    int64
		blobs    bool
		wantBlob bool
		wantErr  error
	}{
		{"empty", 0, 0, true, false, nil},
		{"inline up to InlineMax", courier.InlineMax, 0, true, false, nil},
		{"a blob past InlineMax", courier.InlineMax + 1, 0, true, true, nil},
		{"over the limit", 3 << 20, 2 << 20, true, false, courier.ErrPayloadTooLarge},
		{"past InlineMax without a blob area", courier.InlineMax + 1, 0, false, false, courier.ErrPayloadTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			payload := bytes.Repeat([]byte{'a', 'b', 'c'}, tc.size/3+1)[:tc.size]
			var blobs courier.Blobs
			if tc.blobs {
				blobs = dir
			}
			sp := courier.NewSpool(ctx, blobs, tc.limit)
			defer sp.Close()
			err := spoolAll(t, sp, payload)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("spooling %d bytes: %v, want %v", tc.size, err, tc.wantErr)
			}
			if err != nil {
				return
			}
			m := &courier.Message{}
			if err := sp.Finish(m); err != nil {
				t.Fatal(err)
			}
			if m.HasBlob() != tc.wantBlob {
				t.Fatalf("blob %q, want a blob: %v", m.Blob, tc.wantBlob)
			}
			if tc.wantBlob && (m.Size != tc.size || m.Digest != courier.PayloadDigest(payload) || m.Payload != nil) {
				t.Fatalf("size %d digest %s payload %d bytes; want %d, the payload's digest, none inline", m.Size, m.Digest, len(m.Payload), tc.size)
			}
			if !tc.wantBlob && (m.Digest != "" || !bytes.Equal(m.Payload, payload) || m.Payload == nil) {
				t.Fatalf("inline payload of %d bytes with digest %q; want the payload, no digest", len(m.Payload), m.Digest)
			}
			r, err := m.OpenPayload(ctx, dir)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(r)
			r.Close()
			if !bytes.Equal(got, payload) {
				t.Fatal("the payload read back differs")
			}
		})
	}
}

// A digest spool keeps what an inline payload would and, of a larger one,
// only what its hash needs: the hash comes out as the stored blob's.
func TestDigestSpoolHashesAsTheBlob(t *testing.T) {
	ctx := context.Background()
	dir := mustBlobDir(t)
	payload := bytes.Repeat([]byte("xyz"), courier.InlineMax)
	stored := &courier.Message{ID: "a", Type: "t", Route: "r"}
	sp := courier.NewSpool(ctx, dir, 0)
	defer sp.Close()
	spoolWhole(t, sp, payload, stored)
	repeat := &courier.Message{ID: "a", Type: "t", Route: "r"}
	spoolWhole(t, courier.NewDigestSpool(0), payload, repeat)
	if repeat.HasBlob() || repeat.Payload != nil || repeat.Size != len(payload) {
		t.Fatalf("digest spool kept blob %q, %d bytes inline, size %d", repeat.Blob, len(repeat.Payload), repeat.Size)
	}
	if courier.ContentHash(repeat) != courier.ContentHash(stored) {
		t.Fatal("the repeat hashes otherwise than the stored blob message")
	}
	// Inline payloads hash by their bytes, as before blobs.
	small := &courier.Message{ID: "b", Type: "t", Route: "r", Payload: []byte("hi")}
	viaSpool := &courier.Message{ID: "b", Type: "t", Route: "r"}
	spoolWhole(t, courier.NewDigestSpool(0), []byte("hi"), viaSpool)
	if courier.ContentHash(small) != courier.ContentHash(viaSpool) {
		t.Fatal("a small payload through a digest spool hashes otherwise")
	}
}

// ReadPayload reads a blob whole, but refuses one over its limit.
func TestReadPayload(t *testing.T) {
	ctx := context.Background()
	dir := mustBlobDir(t)
	payload := bytes.Repeat([]byte{7}, courier.InlineMax+10)
	m := &courier.Message{}
	sp := courier.NewSpool(ctx, dir, 0)
	defer sp.Close()
	spoolWhole(t, sp, payload, m)
	if got, err := m.ReadPayload(ctx, dir, 2<<20); err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("ReadPayload: %d bytes, %v", len(got), err)
	}
	if _, err := m.ReadPayload(ctx, dir, courier.InlineMax); courier.ErrorCode(err) != courier.CodePayloadTooLarge {
		t.Fatalf("ReadPayload over its limit: %v, want payload_too_large", err)
	}
	if _, err := m.ReadPayload(ctx, nil, 2<<20); courier.ErrorCode(err) != courier.CodeUnavailable {
		t.Fatalf("ReadPayload without blobs: %v, want unavailable", err)
	}
}
