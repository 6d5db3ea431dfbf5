package smtp_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"mime"
	"mime/multipart"
	"strings"
	"testing"
	"time"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/blobtest"
	"github.com/courier-gw/courier/internal/testkit/mailsink"
	smtptransport "github.com/courier-gw/courier/transport/smtp"
)

// blobEndpoint is endpoint with the attempt timeout of the other
// transports' blob tests: a timeout bounds the whole attempt, and megabytes
// of base64 through DATA under -race on a busy machine take longer than the
// 5 s that suit a small mail.
func blobEndpoint(addr string) *courier.Endpoint {
	e := endpoint(addr)
	e.Timeout = 30 * time.Second
	return e
}

func sendBlob(tr *smtptransport.Transport, e *courier.Endpoint, m *courier.Message, blobs courier.Blobs) courier.Result {
	return tr.Send(context.Background(), courier.Delivery{Message: m, Endpoint: e, Attempt: 1, Blobs: blobs})
}

// A blob travels as a base64 attachment, whatever its type, encoded as it
// streams from the store, and decodes to the same bytes.
func TestBlobIsAnAttachment(t *testing.T) {
	t.Parallel()
	srv := mailsink.MustStart(t, mailsink.Options{})
	tr := newTransport(t, smtptransport.Options{})
	blobs := blobtest.Area(t)
	for _, tc := range []struct {
		ct, filename string
	}{
		{"application/zip", "big-1.zip"},
		{"text/plain; charset=utf-8", "big-1.bin"}, // text too: inline, it would be read whole
	} {
		m := blobtest.Message(t, blobs, "big-1", 6<<20, 1)
		m.ContentType = tc.ct
		if res := sendBlob(tr, blobEndpoint(srv.Addr()), m, blobs); !res.Delivered() {
			t.Fatalf("%s: %+v", tc.ct, res)
		}
		mails := srv.Mails()
		data := mails[len(mails)-1].Data
		for _, line := range strings.Split(string(data), "\r\n") {
			if len(line) > 78 {
				t.Fatalf("%s: a line of %d characters", tc.ct, len(line))
			}
		}
		msg := parse(t, data)
		_, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
		if err != nil {
			t.Fatal(err)
		}
		r := multipart.NewReader(msg.Body, params["boundary"])
		text, err := r.NextPart()
		if err != nil {
			t.Fatal(err)
		}
		if intro, _ := io.ReadAll(text); !bytes.Contains(intro, []byte("is attached (")) || !bytes.Contains(intro, []byte(", 6291456 bytes)")) {
			t.Errorf("%s: text part %q", tc.ct, intro)
		}
		att, err := r.NextPart()
		if err != nil {
			t.Fatal(err)
		}
		if att.FileName() != tc.filename || att.Header.Get("Content-Transfer-Encoding") != "base64" {
			t.Errorf("%s: attachment %q in %q", tc.ct, att.FileName(), att.Header.Get("Content-Transfer-Encoding"))
		}
		digest, n := blobtest.Digest(t, base64.NewDecoder(base64.StdEncoding, att))
		if digest != m.Digest || n != int64(m.Size) {
			t.Fatalf("%s: the attachment decodes to %d bytes with sha256 %s, want %d with %s", tc.ct, n, digest, m.Size, m.Digest)
		}
		if _, err := r.NextPart(); err != io.EOF {
			t.Errorf("%s: after the attachment: %v", tc.ct, err)
		}
	}
}

// A blob the store cannot give fails the attempt as transport, and the
// server takes nothing: not even a mail cut short.
func TestUnreadableBlobSendsNoMail(t *testing.T) {
	t.Parallel()
	srv := mailsink.MustStart(t, mailsink.Options{})
	tr := newTransport(t, smtptransport.Options{})
	for _, tc := range blobtest.UnreadableCases(t, "the payload ended after 2097152 of the 2097162 bytes stored") {
		t.Run(tc.Name, func(t *testing.T) {
			res := sendBlob(tr, blobEndpoint(srv.Addr()), tc.Message, tc.Blobs)
			t.Logf("%s: %s", res.Class, res.Error)
			blobtest.WantUnreadable(t, res, tc.Want)
		})
	}
	if n := len(srv.Mails()); n != 0 {
		t.Fatalf("the server took %d mails", n)
	}
}

// Compose renders payloads in memory and refuses a blob, which only a send
// reads.
func TestComposeRefusesABlob(t *testing.T) {
	t.Parallel()
	m := &courier.Message{ID: "big-1", Type: "archive", Blob: blobtest.MissingRef, Size: 2 << 20}
	if _, err := smtptransport.Compose(courier.Delivery{Message: m, Endpoint: endpoint("mx:25"), Attempt: 1}, now, "courier.test", ""); err == nil {
		t.Fatal("Compose rendered a blob it cannot read")
	}
}
