// Package s3test gives a test a prefix of its own in the bucket of the
// S3-compatible service named by COURIER_TEST_S3 (made if missing), emptied
// when the test ends.
package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"testing"

	"github.com/courier-gw/courier/internal/testkit/testenv"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Bucket is the bucket of the tests; each test keeps to a prefix of its
// own in it.
const Bucket = "courier-test"

// Area is a test's prefix in Bucket, with a client of the service.
type Area struct {
	Client         *minio.Client
	Endpoint       string // the service's URL, without keys
	Access, Secret string
	Prefix         string
}

// New makes Bucket if it is missing and picks a fresh prefix in it, whose
// objects and unfinished uploads are removed when the test ends.
func New(t testing.TB) *Area {
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
	ctx := context.Background()
	if ok, err := c.BucketExists(ctx, Bucket); err != nil {
		t.Fatalf("reach the S3 service at %s: %v", endpoint, err)
	} else if !ok {
		if err := c.MakeBucket(ctx, Bucket, minio.MakeBucketOptions{}); err != nil {
			if code := minio.ToErrorResponse(err).Code; code != "BucketAlreadyOwnedByYou" && code != "BucketAlreadyExists" {
				t.Fatalf("make the bucket %s: %v", Bucket, err)
			}
		}
	}
	var b [6]byte
	rand.Read(b[:])
	a := &Area{Client: c, Endpoint: endpoint, Access: access, Secret: secret, Prefix: "test-" + hex.EncodeToString(b[:]) + "/"}
	t.Cleanup(func() {
		for _, key := range a.Objects(t) {
			c.RemoveObject(ctx, Bucket, key, minio.RemoveObjectOptions{})
		}
		for _, up := range a.Uploads(t) {
			minio.Core{Client: c}.AbortMultipartUpload(ctx, Bucket, up.Key, up.UploadID)
		}
	})
	return a
}

// Objects lists the keys of the objects under the prefix.
func (a *Area) Objects(t testing.TB) []string {
	t.Helper()
	var keys []string
	for obj := range a.Client.ListObjectsIter(context.Background(), Bucket, minio.ListObjectsOptions{Prefix: a.Prefix, Recursive: true}) {
		if obj.Err != nil {
			t.Fatalf("list the objects: %v", obj.Err)
		}
		keys = append(keys, obj.Key)
	}
	return keys
}

// Uploads lists the unfinished multipart uploads under the prefix.
func (a *Area) Uploads(t testing.TB) []minio.ObjectMultipartInfo {
	t.Helper()
	var ups []minio.ObjectMultipartInfo
	for up := range a.Client.ListIncompleteUploads(context.Background(), Bucket, a.Prefix, true) {
		if up.Err != nil {
			t.Fatalf("list the uploads: %v", up.Err)
		}
		ups = append(ups, up)
	}
	return ups
}
