package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/courier-gw/courier/internal/pgtest"
	"github.com/courier-gw/courier/internal/testenv"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// s3Area is a prefix of its own, for one test, in the bucket of the S3
// service of the tests.
type s3Area struct {
	client           *minio.Client
	endpoint, bucket string
	prefix           string
	access, secret   string
}

// newS3Area makes the tests' bucket if it is missing and picks a fresh
// prefix in it, emptied when the test ends.
func newS3Area(t *testing.T) *s3Area {
	t.Helper()
	endpoint, access, secret := testenv.S3Access(t)
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	c, err := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(access, secret, ""), Secure: u.Scheme == "https"})
	if err != nil {
		t.Fatal(err)
	}
	a := &s3Area{client: c, endpoint: endpoint, bucket: "courier-test", access: access, secret: secret}
	ctx := context.Background()
	if ok, err := c.BucketExists(ctx, a.bucket); err != nil {
		t.Fatalf("reach the S3 service at %s: %v", endpoint, err)
	} else if !ok {
		if err := c.MakeBucket(ctx, a.bucket, minio.MakeBucketOptions{}); err != nil {
			if code := minio.ToErrorResponse(err).Code; code != "BucketAlreadyOwnedByYou" && code != "BucketAlreadyExists" {
				t.Fatalf("make the bucket %s: %v", a.bucket, err)
			}
		}
	}
	var b [6]byte
	rand.Read(b[:])
	a.prefix = "process-" + hex.EncodeToString(b[:]) + "/"
	t.Cleanup(func() {
		for _, key := range a.objects(t) {
			c.RemoveObject(ctx, a.bucket, key, minio.RemoveObjectOptions{})
		}
		for _, up := range a.uploads(t) {
			minio.Core{Client: c}.AbortMultipartUpload(ctx, a.bucket, up.Key, up.UploadID)
		}
	})
	return a
}

// storeConfig is the store section of a node on PostgreSQL at dsn whose
// blobs are in the area, the secret key taken from the environment.
func (a *s3Area) storeConfig(t *testing.T, dsn, grace string) string {
	t.Setenv("COURIER_TEST_S3_SECRET_KEY", a.secret)
	return fmt.Sprintf(`{driver: postgres, dsn: %q, blob_s3: {endpoint: %q, bucket: %s, prefix: %q, access_key: %q, secret_key: "${COURIER_TEST_S3_SECRET_KEY}", upload_grace: %s}}`,
		dsn, a.endpoint, a.bucket, a.prefix, a.access, grace)
}

func (a *s3Area) objects(t *testing.T) []string {
	t.Helper()
	var keys []string
	for obj := range a.client.ListObjectsIter(context.Background(), a.bucket, minio.ListObjectsOptions{Prefix: a.prefix, Recursive: true}) {
		if obj.Err != nil {
			t.Fatalf("list the objects: %v", obj.Err)
		}
		keys = append(keys, obj.Key)
	}
	return keys
}

func (a *s3Area) uploads(t *testing.T) []minio.ObjectMultipartInfo {
	t.Helper()
	var ups []minio.ObjectMultipartInfo
	for up := range a.client.ListIncompleteUploads(context.Background(), a.bucket, a.prefix, true) {
		if up.Err != nil {
			t.Fatalf("list the uploads: %v", up.Err)
		}
		ups = append(ups, up)
	}
	return ups
}

// With its blobs in an S3 bucket, a node on PostgreSQL takes 256 MiB in
// and out streamed: the receiver gets the same bytes, the blob is an
// object of the bucket, and courier's memory stays under 200 MB.
func TestLargePayloadThroughS3(t *testing.T) {
	skipIfShort(t)
	area := newS3Area(t)
	dsn, _ := pgtest.SchemaDSN(t)
	rc := newHashingReceiver(t, 0)
	cfg := filepath.Join(t.TempDir(), "courier.yaml")
	writeFile(t, cfg, nodeConfig(freeAddr(t), area.storeConfig(t, dsn, "1h"))+largeConfig(rc))
	p := startServerWith(t, cfg)
	streamThrough(t, rc, p, largeOnPostgres)
	if keys := area.objects(t); len(keys) != 1 {
		t.Fatalf("the bucket holds %v under %s; want the one blob", keys, area.prefix)
	}
	if log := p.log(); !strings.Contains(log, "blobs: S3 bucket "+area.bucket) || strings.Contains(log, area.secret) {
		t.Fatalf("the start names the bucket, never the secret key; it said:\n%s", log)
	}
}

// A SIGKILL in the middle of an upload to the bucket leaves no message,
// and, once the restarted node's sweep has passed the upload grace, neither
// an incomplete upload nor an object.
func TestKillDuringUploadToS3(t *testing.T) {
	skipIfShort(t)
	area := newS3Area(t)
	dsn, _ := pgtest.SchemaDSN(t)
	rc := newHashingReceiver(t, 0)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "courier.yaml")
	listen := freeAddr(t)
	writeFile(t, cfg, nodeConfig(listen, area.storeConfig(t, dsn, "1h"))+largeConfig(rc))
	p := startServerWith(t, cfg)

	killUploading(t, p, func() {
		waitUntil(t, p, 30*time.Second, "the upload to be under way in the bucket", func() bool { return len(area.uploads(t)) == 1 })
	})
	if ups := area.uploads(t); len(ups) != 1 {
		t.Fatalf("after the kill the bucket has %d incomplete uploads; want the one cut off", len(ups))
	}

	// The restarted node spares nothing older than a second.
	writeFile(t, cfg, nodeConfig(listen, area.storeConfig(t, dsn, "1s"))+largeConfig(rc))
	time.Sleep(1500 * time.Millisecond)
	p = startServerWith(t, cfg)
	if status := p.get(t, "/v1/messages/cut-off"); status != http.StatusNotFound {
		t.Fatalf("the message whose upload was cut off: %d, want 404", status)
	}
	waitUntil(t, p, 90*time.Second, "the bucket to hold no upload and no object", func() bool {
		return len(area.uploads(t)) == 0 && len(area.objects(t)) == 0
	})
}
