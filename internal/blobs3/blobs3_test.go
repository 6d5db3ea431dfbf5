package blobs3_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/blobs3"
	"github.com/courier-gw/courier/internal/testkit/pgtest"
	"github.com/courier-gw/courier/internal/testkit/s3test"
	"github.com/courier-gw/courier/postgres"
	"github.com/courier-gw/courier/sqlite"
	"github.com/courier-gw/courier/storetest"
	"github.com/minio/minio-go/v7"
)

// mustClient returns the test's area in the bucket of the S3 service of the
// tests, and the options to open a blob area on it.
func mustClient(t *testing.T) (*s3test.Area, blobs3.Options) {
	t.Helper()
	a := s3test.New(t)
	return a, blobs3.Options{Endpoint: a.Endpoint, Bucket: s3test.Bucket, Prefix: a.Prefix, AccessKey: a.Access, SecretKey: a.Secret}
}

func mustOpen(t *testing.T, opts blobs3.Options) *blobs3.Bucket {
	t.Helper()
	b, err := blobs3.Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// runBlobSuite runs the store suite's blob tests on the stores open makes,
// each with its blobs in a bucket area of its own.
func runBlobSuite(t *testing.T, open func(t *testing.T, blobs courier.Blobs) (courier.Store, error)) {
	storetest.RunBlobs(t, func(t *testing.T) courier.Store {
		_, opts := mustClient(t)
		opts.UploadGrace = blobs3.NoUploadGrace
		s, err := open(t, mustOpen(t, opts))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// The store suite's blob tests, with the blobs in a bucket: on SQLite.
func TestStoreSQLite(t *testing.T) {
	runBlobSuite(t, func(t *testing.T, blobs courier.Blobs) (courier.Store, error) {
		return sqlite.Open(filepath.Join(t.TempDir(), "courier.db"), sqlite.Options{Blobs: blobs})
	})
}

// The same on PostgreSQL.
func TestStorePostgres(t *testing.T) {
	runBlobSuite(t, func(t *testing.T, blobs courier.Blobs) (courier.Store, error) {
		dsn, schema := pgtest.Schema(t)
		return postgres.Open(context.Background(), dsn, postgres.Options{Schema: schema, MaxConns: 8, Blobs: blobs})
	})
}

func nothingReferenced(context.Context, []string) (map[string]bool, error) { return nil, nil }

// A blob spans several parts, is read back whole, and a writer closed
// without Commit leaves neither an object nor an upload.
func TestParts(t *testing.T) {
	a, opts := mustClient(t)
	b := mustOpen(t, opts)
	ctx := context.Background()
	payload := make([]byte, 40<<20) // three parts
	rand.Read(payload)
	w, err := b.Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for p := payload; len(p) > 0; p = p[min(len(p), 1<<20):] {
		if _, err := w.Write(p[:min(len(p), 1<<20)]); err != nil {
			t.Fatal(err)
		}
	}
	ref, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	r, err := b.Open(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("read back %d bytes (%v), want the %d written", len(got), err, len(payload))
	}
	if n, size, err := b.Usage(ctx); err != nil || n != 1 || size != int64(len(payload)) {
		t.Fatalf("usage: %d blobs of %d bytes (%v), want 1 of %d", n, size, err, len(payload))
	}

	cut, err := b.Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cut.Write(payload[:20<<20]); err != nil { // a part uploaded
		t.Fatal(err)
	}
	if err := cut.Close(); err != nil {
		t.Fatal(err)
	}
	if ups := a.Uploads(t); len(ups) != 0 {
		t.Fatalf("a writer closed without commit left %d uploads", len(ups))
	}
	if keys := a.Objects(t); len(keys) != 1 || keys[0] != opts.Prefix+ref {
		t.Fatalf("objects %v, want only the committed blob", keys)
	}
	if _, err := b.Open(ctx, strings.Repeat("0", 32)); courier.ErrorCode(err) != courier.CodeNotFound {
		t.Fatalf("a blob that is not there: %v, want not found", err)
	}
}

// Within the upload grace a sweep leaves an unreferenced object and an
// incomplete upload alone, as they may be another node's uploads; past it,
// it removes the object and aborts the upload, which a crash cut off.
func TestUploadGrace(t *testing.T) {
	a, opts := mustClient(t)
	opts.UploadGrace = 3 * time.Second
	b := mustOpen(t, opts)
	ctx := context.Background()

	w, err := b.Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("an orphan"))
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	// An upload that no writer of this process holds: another node's, or
	// one cut off.
	core := minio.Core{Client: a.Client}
	key := opts.Prefix + strings.Repeat("ab", 16)
	id, err := core.NewMultipartUpload(ctx, s3test.Bucket, key, minio.PutObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := core.PutObjectPart(ctx, s3test.Bucket, key, id, 1, bytes.NewReader([]byte("a part")), 6, minio.PutObjectPartOptions{}); err != nil {
		t.Fatal(err)
	}
	// Not blobs of this area: left alone, whatever their age.
	foreign := opts.Prefix + "notes.txt"
	if _, err := a.Client.PutObject(ctx, s3test.Bucket, foreign, strings.NewReader("mine"), 4, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}

	if n, err := b.Sweep(ctx, nothingReferenced); err != nil || n != 0 {
		t.Fatalf("a sweep within the grace removed %d (%v), want 0", n, err)
	}
	if keys, ups := a.Objects(t), a.Uploads(t); len(keys) != 2 || len(ups) != 1 {
		t.Fatalf("within the grace: objects %v and %d uploads, want the orphan, the foreign object and the upload", keys, len(ups))
	}

	time.Sleep(opts.UploadGrace + time.Second)
	if n, err := b.Sweep(ctx, nothingReferenced); err != nil || n != 2 {
		t.Fatalf("a sweep past the grace removed %d (%v), want the orphan and the upload", n, err)
	}
	if keys, ups := a.Objects(t), a.Uploads(t); len(keys) != 1 || keys[0] != foreign || len(ups) != 0 {
		t.Fatalf("past the grace: objects %v and %d uploads, want only %s", keys, len(ups), foreign)
	}
}

// A writer's upload older than the grace is not swept while the writer
// holds it, but its commit is refused: it took more than half the grace.
func TestUploadLongerThanHalfTheGrace(t *testing.T) {
	_, opts := mustClient(t)
	opts.UploadGrace = time.Second
	b := mustOpen(t, opts)
	ctx := context.Background()
	w, err := b.Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.Write(make([]byte, 1000))
	time.Sleep(2 * time.Second)
	if n, err := b.Sweep(ctx, nothingReferenced); err != nil || n != 0 {
		t.Fatalf("a sweep removed %d (%v) while a writer held its upload", n, err)
	}
	// It took longer than half the grace: cut off, as another node's
	// sweep may take it from now on.
	if _, err := w.Commit(); courier.ErrorCode(err) != courier.CodeUnavailable || !strings.Contains(err.Error(), "upload_grace") {
		t.Fatalf("commit of an upload older than half the grace: %v, want unavailable", err)
	}
}

// Open refuses a bucket that is not there, naming it.
func TestOpenMissingBucket(t *testing.T) {
	_, opts := mustClient(t)
	opts.Bucket = "courier-no-such-bucket"
	_, err := blobs3.Open(context.Background(), opts)
	if err == nil || !strings.Contains(err.Error(), opts.Bucket) {
		t.Fatalf("open a missing bucket: %v, want an error naming it", err)
	}
	if strings.Contains(err.Error(), opts.SecretKey) {
		t.Fatalf("the error shows the secret key: %v", err)
	}
}
