// Package blobs3 keeps courier's blobs (payloads over courier.InlineMax) as
// objects in a bucket of an S3-compatible service (AWS S3, MinIO, Ceph,
// Versity), under a key prefix, for a store whose nodes share the bucket.
//
// A blob is uploaded as it is written, in parts of a bounded size, under
// the key prefix + ref; the object exists once the upload is completed
// (Commit). An upload closed without Commit is aborted and leaves nothing.
//
// S3 has no locks, so a sweep cannot tell by itself whether a blob is
// still being written or waits for its message to be stored. The rule:
//
//   - a blob held by a writer of this process (from Create to Close) is
//     never swept;
//   - an object younger than UploadGrace is never swept, nor is an
//     incomplete multipart upload started less than UploadGrace ago: these
//     may be another node's uploads whose message is not stored yet;
//   - any other object that no stored message refers to is removed, and
//     any other incomplete upload (one cut off by a crash) is aborted.
//
// UploadGrace must therefore be longer than any upload takes from its
// start to the storing of its message: an upload is cut off (and its
// ingest answered 503) once it has taken half the grace, which leaves the
// other half for storing the message. Ages are measured from the
// service's timestamps with this node's clock, so the clocks must agree to
// well within the grace.
package blobs3

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// DefaultUploadGrace is the UploadGrace of Options that leave it zero.
const DefaultUploadGrace = time.Hour

// NoUploadGrace as Options.UploadGrace lets a sweep remove every object
// and upload this process does not hold, whatever its age: for a bucket
// that only one node uses, and for tests.
const NoUploadGrace time.Duration = -1

// partSize is the size of an upload's parts, which is what an upload keeps
// in memory: S3 needs at least 5 MiB per part, and 10,000 parts of this
// size take the largest payload courier accepts many times over.
const partSize = 16 << 20

// sweepBatch is how many blobs a sweep asks the store about at once.
const sweepBatch = 500

// opTimeout bounds a removal or an abort made on behalf of a writer whose
// context may be gone.
const opTimeout = time.Minute

// Options locate the bucket and say how a sweep treats young objects.
type Options struct {
	// Endpoint is the service's URL, http:// or https:// with a host and
	// an optional port, and no path (https://s3.eu-west-1.amazonaws.com).
	Endpoint string
	// Bucket holds the blobs; it must exist.
	Bucket string
	// Prefix starts the key of every blob ("courier/blobs/"), so that the
	// bucket can hold other things; a sweep only looks under it.
	Prefix string
	// Region is the bucket's region; empty asks the service.
	Region string
	// AccessKey and SecretKey sign the requests.
	AccessKey, SecretKey string
	// UploadGrace is how long an object or an upload is safe from a
	// sweep after its start (see the package's doc): zero means
	// DefaultUploadGrace, NoUploadGrace (negative) none.
	UploadGrace time.Duration
}

// Bucket is a blob area in an S3 bucket. It implements courier.Blobs.
type Bucket struct {
	client *minio.Client
	bucket string
	prefix string
	grace  time.Duration // 0: none

	mu   sync.Mutex
	held map[string]bool // refs of this process's open writers
}

var _ courier.Blobs = (*Bucket)(nil)

// Open connects to the service and checks that the bucket is there; it
// does not create it, as that takes rights (and a choice of region and
// policy) that the blob area itself does not need.
func Open(ctx context.Context, opts Options) (*Bucket, error) {
	u, err := url.Parse(opts.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return nil, fmt.Errorf("the S3 endpoint %q is not an http:// or https:// URL of a host without a path", opts.Endpoint)
	}
	if opts.Bucket == "" {
		return nil, errors.New("no S3 bucket given")
	}
	client, err := minio.New(u.Host, &minio.Options{
		Creds:  credentials.NewStaticV4(opts.AccessKey, opts.SecretKey, ""),
		Secure: u.Scheme == "https",
		Region: opts.Region,
	})
	if err != nil {
		return nil, fmt.Errorf("the S3 endpoint %s: %w", u.Redacted(), err)
	}
	ok, err := client.BucketExists(ctx, opts.Bucket)
	if err != nil {
		return nil, fmt.Errorf("reach the S3 bucket %q at %s: %w", opts.Bucket, u.Redacted(), err)
	}
	if !ok {
		return nil, fmt.Errorf("the S3 bucket %q does not exist at %s: create it first", opts.Bucket, u.Redacted())
	}
	grace := opts.UploadGrace
	switch {
	case grace == 0:
		grace = DefaultUploadGrace
	case grace < 0:
		grace = 0
	}
	return &Bucket{client: client, bucket: opts.Bucket, prefix: opts.Prefix, grace: grace, held: map[string]bool{}}, nil
}

// newRef returns a fresh random ref.
func newRef() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// refOf returns the ref of an object key, if the key is one of a blob of
// this area: the prefix and 32 hex digits.
func (b *Bucket) refOf(key string) (string, bool) {
	ref, ok := strings.CutPrefix(key, b.prefix)
	if !ok || len(ref) != 32 {
		return "", false
	}
	if _, err := hex.DecodeString(ref); err != nil {
		return "", false
	}
	return ref, true
}

func (b *Bucket) isHeld(ref string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held[ref]
}

// young reports whether something started at t is within the grace.
func (b *Bucket) young(t, now time.Time) bool {
	return b.grace > 0 && now.Sub(t) < b.grace
}

func unavailable(what string, err error) error {
	return courier.Errorf(courier.CodeUnavailable, "%s: %v", what, err)
}

// Create starts a new blob, uploaded as it is written.
func (b *Bucket) Create(ctx context.Context) (courier.BlobWriter, error) {
	ref, err := newRef()
	if err != nil {
		return nil, unavailable("create a blob", err)
	}
	b.mu.Lock()
	b.held[ref] = true
	b.mu.Unlock()
	pr, pw := io.Pipe()
	// An upload may take half the grace at most: what is left of it is
	// for storing its message, before another node's sweep may take an
	// object or upload that old.
	uctx, cancel := context.WithCancel(ctx)
	if b.grace > 0 {
		uctx, cancel = context.WithTimeout(ctx, b.grace/2)
	}
	w := &writer{b: b, ctx: ctx, ref: ref, pw: pw, cancel: cancel, done: make(chan error, 1)}
	go func() {
		// With no size given the upload is multipart, one part in memory
		// at a time; on an error it is aborted.
		_, err := b.client.PutObject(uctx, b.bucket, b.prefix+ref, pr, -1, minio.PutObjectOptions{
			PartSize:    partSize,
			ContentType: "application/octet-stream",
		})
		if err != nil {
			pr.CloseWithError(err) // later writes fail at once
		} else {
			pr.CloseWithError(errUploadEnded)
		}
		w.done <- err
	}()
	return w, nil
}

// errAbandoned ends the upload of a writer closed without Commit.
var errAbandoned = errors.New("the blob was abandoned before its commit")

// errUploadEnded answers a write after the upload was completed.
var errUploadEnded = errors.New("the blob's upload has ended")

type writer struct {
	b         *Bucket
	ctx       context.Context
	ref       string
	pw        *io.PipeWriter
	cancel    context.CancelFunc
	done      chan error // the upload's outcome
	ended     bool       // done was received
	committed bool
	removed   bool
	closed    bool
}

func (w *writer) Write(p []byte) (int, error) {
	n, err := w.pw.Write(p)
	if err != nil {
		return n, unavailable("upload a blob", err)
	}
	return n, nil
}

// wait waits for the upload to end and returns its outcome; called again,
// it returns nil.
func (w *writer) wait() error {
	if w.ended {
		return nil
	}
	w.ended = true
	return <-w.done
}

// Commit ends the upload; the object exists once the service has
// completed it.
func (w *writer) Commit() (string, error) {
	if w.ended || w.removed {
		return "", courier.Errorf(courier.CodeUnavailable, "blob %s: commit after the upload ended", w.ref)
	}
	w.pw.Close()
	if err := w.wait(); err != nil {
		if errors.Is(err, context.DeadlineExceeded) && w.b.grace > 0 && w.ctx.Err() == nil {
			return "", courier.Errorf(courier.CodeUnavailable, "blob %s: the upload took longer than half of upload_grace (%v), after which another node's sweep may take it", w.ref, w.b.grace)
		}
		return "", unavailable("upload a blob", err)
	}
	w.committed = true
	return w.ref, nil
}

func (w *writer) Abort() error {
	if w.removed {
		return nil
	}
	w.removed = true
	if !w.committed {
		// The upload fails on its next read and aborts itself; the
		// context is left alone, so that a part being sent ends first
		// and the abort knows the upload's id.
		w.pw.CloseWithError(errAbandoned)
		w.wait()
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), opTimeout)
	defer cancel()
	if err := w.b.client.RemoveObject(ctx, w.b.bucket, w.b.prefix+w.ref, minio.RemoveObjectOptions{}); err != nil {
		return unavailable("remove blob "+w.ref, err)
	}
	return nil
}

func (w *writer) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	var err error
	if !w.committed {
		err = w.Abort()
	}
	w.cancel()
	w.b.mu.Lock()
	delete(w.b.held, w.ref)
	w.b.mu.Unlock()
	return err
}

// Open reads a blob, streamed from the service.
func (b *Bucket) Open(ctx context.Context, ref string) (io.ReadCloser, error) {
	if _, ok := b.refOf(b.prefix + ref); !ok {
		return nil, courier.Errorf(courier.CodeNotFound, "no blob %q", ref)
	}
	obj, err := b.client.GetObject(ctx, b.bucket, b.prefix+ref, minio.GetObjectOptions{})
	if err != nil {
		return nil, unavailable("open blob "+ref, err)
	}
	// The object is fetched on its first use: a missing one shows here.
	if _, err := obj.Stat(); err != nil {
		obj.Close()
		if minio.ToErrorResponse(err).Code == minio.NoSuchKey {
			return nil, courier.Errorf(courier.CodeNotFound, "blob %s is not there", ref)
		}
		return nil, unavailable("open blob "+ref, err)
	}
	return &reader{obj: obj, ref: ref}, nil
}

type reader struct {
	obj *minio.Object
	ref string
}

func (r *reader) Read(p []byte) (int, error) {
	n, err := r.obj.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = unavailable("read blob "+r.ref, err)
	}
	return n, err
}

func (r *reader) Close() error { return r.obj.Close() }

// Remove removes a committed blob no message refers to any more.
func (b *Bucket) Remove(ctx context.Context, ref string) error {
	if _, ok := b.refOf(b.prefix + ref); !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if err := b.client.RemoveObject(ctx, b.bucket, b.prefix+ref, minio.RemoveObjectOptions{}); err != nil {
		return unavailable("remove blob "+ref, err)
	}
	return nil
}

// Sweep removes the objects under the prefix that no writer of this
// process holds, that are older than the grace and that referenced does
// not know, and aborts the incomplete uploads under the prefix that no
// writer of this process holds and that started before the grace.
func (b *Bucket) Sweep(ctx context.Context, referenced func(ctx context.Context, refs []string) (map[string]bool, error)) (int, error) {
	now := time.Now()
	removed := 0
	var batch []string
	ask := func() error {
		if len(batch) == 0 {
			return nil
		}
		known, err := referenced(ctx, batch)
		if err != nil {
			return err
		}
		for _, ref := range batch {
			if known[ref] || b.isHeld(ref) {
				continue
			}
			if err := b.client.RemoveObject(ctx, b.bucket, b.prefix+ref, minio.RemoveObjectOptions{}); err != nil {
				return unavailable("remove blob "+ref, err)
			}
			removed++
		}
		batch = batch[:0]
		return nil
	}
	for obj := range b.client.ListObjectsIter(ctx, b.bucket, minio.ListObjectsOptions{Prefix: b.prefix, Recursive: true}) {
		if obj.Err != nil {
			return removed, unavailable("list the blobs", obj.Err)
		}
		ref, ok := b.refOf(obj.Key)
		if !ok || b.isHeld(ref) || b.young(obj.LastModified, now) {
			continue
		}
		if batch = append(batch, ref); len(batch) >= sweepBatch {
			if err := ask(); err != nil {
				return removed, err
			}
		}
	}
	if err := ask(); err != nil {
		return removed, err
	}
	n, err := b.abortCutOff(ctx, now)
	return removed + n, err
}

// abortCutOff aborts the incomplete uploads under the prefix that no
// writer of this process holds and that started before the grace.
func (b *Bucket) abortCutOff(ctx context.Context, now time.Time) (int, error) {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel() // lets the listing's goroutine go if we stop early
	type upload struct{ key, id string }
	var cutOff []upload
	for up := range b.client.ListIncompleteUploads(lctx, b.bucket, b.prefix, true) {
		if up.Err != nil {
			return 0, unavailable("list the uploads", up.Err)
		}
		ref, ok := b.refOf(up.Key)
		if !ok || b.isHeld(ref) || b.young(up.Initiated, now) {
			continue
		}
		cutOff = append(cutOff, upload{up.Key, up.UploadID})
	}
	core := minio.Core{Client: b.client}
	for i, up := range cutOff {
		if err := core.AbortMultipartUpload(ctx, b.bucket, up.key, up.id); err != nil && minio.ToErrorResponse(err).Code != minio.NoSuchUpload {
			return i, unavailable("abort an upload cut off", err)
		}
	}
	return len(cutOff), nil
}

// Usage counts the blobs under the prefix and their bytes; an upload
// counts once it is committed.
func (b *Bucket) Usage(ctx context.Context) (int, int64, error) {
	n, size := 0, int64(0)
	for obj := range b.client.ListObjectsIter(ctx, b.bucket, minio.ListObjectsOptions{Prefix: b.prefix, Recursive: true}) {
		if obj.Err != nil {
			return 0, 0, unavailable("list the blobs", obj.Err)
		}
		if _, ok := b.refOf(obj.Key); ok {
			n++
			size += obj.Size
		}
	}
	return n, size, nil
}
