package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/courier-gw/courier/internal/testkit/pgtest"
	"github.com/courier-gw/courier/internal/testkit/s3test"
)

// s3Area is the test's area in the bucket of the S3 service of the tests.
type s3Area struct{ *s3test.Area }

func newS3Area(t *testing.T) s3Area { return s3Area{s3test.New(t)} }

// storeConfig is the store section of a node on PostgreSQL at dsn whose
// blobs are in the area, the secret key taken from the environment.
func (a s3Area) storeConfig(t *testing.T, dsn, grace string) string {
	t.Setenv("COURIER_TEST_S3_SECRET_KEY", a.Secret)
	return fmt.Sprintf(`{driver: postgres, dsn: %q, blob_s3: {endpoint: %q, bucket: %s, prefix: %q, access_key: %q, secret_key: "${COURIER_TEST_S3_SECRET_KEY}", upload_grace: %s}}`,
		dsn, a.Endpoint, s3test.Bucket, a.Prefix, a.Access, grace)
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
	if keys := area.Objects(t); len(keys) != 1 {
		t.Fatalf("the bucket holds %v under %s; want the one blob", keys, area.Prefix)
	}
	if log := p.log(); !strings.Contains(log, "blobs: S3 bucket "+s3test.Bucket) || strings.Contains(log, area.Secret) {
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
		waitUntil(t, p, 30*time.Second, "the upload to be under way in the bucket", func() bool { return len(area.Uploads(t)) == 1 })
	})
	if ups := area.Uploads(t); len(ups) != 1 {
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
		return len(area.Uploads(t)) == 0 && len(area.Objects(t)) == 0
	})
}
