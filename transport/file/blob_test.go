package file_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/blobtest"
	filetransport "github.com/courier-gw/courier/transport/file"
)

func sendBlob(tr *filetransport.Transport, e *courier.Endpoint, m *courier.Message, blobs courier.Blobs) courier.Result {
	return tr.Send(context.Background(), courier.Delivery{Message: m, Endpoint: e, Attempt: 1, Blobs: blobs})
}

func fileDigest(t *testing.T, path string) (string, int64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return blobtest.Digest(t, f)
}

// A blob is streamed into the file; sent again, it is found there already,
// by its digest or, for a message without one, by its bytes.
func TestBlobIsWrittenAndFoundThereAgain(t *testing.T) {
	t.Parallel()
	blobs := blobtest.Area(t)
	for _, tc := range []struct {
		name       string
		keepDigest bool
	}{{"with digest", true}, {"without digest", false}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tr := newTransport(t)
			e := endpoint(dir, "{id}.bin")
			m := blobtest.Message(t, blobs, "big-1", 6<<20, 1)
			digest := m.Digest
			if !tc.keepDigest {
				m.Digest = ""
			}
			res := sendBlob(tr, e, m, blobs)
			if !res.Delivered() || res.Response != "wrote big-1.bin (6291456 bytes)" {
				t.Fatalf("result %+v", res)
			}
			if got, n := fileDigest(t, filepath.Join(dir, "big-1.bin")); got != digest || n != int64(m.Size) {
				t.Fatalf("file has %d bytes with sha256 %s, want %d with %s", n, got, m.Size, digest)
			}
			res = sendBlob(tr, e, m, blobs)
			if !res.Delivered() || res.Response != "big-1.bin was there already with the same 6291456 bytes" {
				t.Fatalf("again: %+v", res)
			}
			// Another blob of the same size under that name is refused.
			other := blobtest.Message(t, blobs, "big-1", 6<<20, 2)
			if !tc.keepDigest {
				other.Digest = ""
			}
			res = sendBlob(tr, e, other, blobs)
			if res.Class != courier.ClassTransport || !strings.Contains(res.Error, "exists with other content (6291456 bytes)") {
				t.Fatalf("other blob: %+v", res)
			}
			if names := dirNames(t, dir); len(names) != 1 {
				t.Errorf("directory holds %v", names)
			}
		})
	}
}

// A blob the store cannot give fails the attempt and leaves nothing behind.
func TestUnreadableBlobWritesNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range blobtest.UnreadableCases(t, "the blob has 2097152 bytes, not the 2097162 stored") {
		t.Run(tc.Name, func(t *testing.T) {
			dir := t.TempDir()
			res := sendBlob(newTransport(t), endpoint(dir, "{id}"), tc.Message, tc.Blobs)
			t.Logf("%s: %s", res.Class, res.Error)
			blobtest.WantUnreadable(t, res, tc.Want)
			if names := dirNames(t, dir); len(names) != 0 {
				t.Errorf("directory holds %v", names)
			}
		})
	}
}
