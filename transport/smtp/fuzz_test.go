package smtp_test

import (
	"bytes"
	"encoding/base64"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"strings"
	"testing"

	"github.com/courier-gw/courier"
	smtptransport "github.com/courier-gw/courier/transport/smtp"
)

// FuzzCompose checks that whatever the payload, content type and headers,
// Compose either refuses or writes a mail that parses, whose lines fit
// SMTP's limit, and whose decoded body is the payload: byte for byte as an
// attachment, with line breaks as CRLF as inline text.
func FuzzCompose(f *testing.F) {
	f.Add([]byte("Invoice 1\nTotal 42 €"), "text/plain", "X-Tenant", "acme")
	f.Add([]byte(`{"a":1}`), "application/json", "Subject", "Rechnung Müller")
	f.Add([]byte{0, 1, 2, 0xff, '\r', '\n', '.'}, "", "X-A", "")
	f.Add([]byte(".\r\n.\n..\r"), "text/plain; charset=iso-8859-1", "Reply-To", "a@b.example")
	f.Add([]byte(strings.Repeat("x", 200)), "text/html", "Cc", "x@y.example")
	f.Add([]byte("x"), "text/plain", "X-Long", strings.Repeat("long ", 300))
	e := endpoint("mx.example:25")
	f.Fuzz(func(t *testing.T, payload []byte, contentType, hk, hv string) {
		m := &courier.Message{ID: "inv-1", Type: "invoice", Payload: payload, ContentType: contentType}
		if hk != "" {
			m.Headers = map[string]string{hk: hv}
		}
		out, err := smtptransport.Compose(courier.Delivery{Message: m, Endpoint: e, Attempt: 1}, now, "courier.test", "")
		if err != nil {
			return
		}
		for _, line := range strings.Split(string(out), "\r\n") {
			if len(line) > 998 {
				t.Fatalf("a line of %d bytes", len(line))
			}
			if strings.ContainsAny(line, "\r\n") {
				t.Fatalf("a bare CR or LF in %q", line)
			}
		}
		msg, err := mail.ReadMessage(bytes.NewReader(out))
		if err != nil {
			t.Fatalf("no mail: %v\n%q", err, out)
		}
		if got := msg.Header.Get("Courier-Message-Id"); got != "inv-1" {
			t.Fatalf("Courier-Message-Id %q", got)
		}
		if got := msg.Header.Get("To"); got != strings.Join(smtptransport.Of(e).To, ", ") {
			t.Fatalf("To %q", got)
		}
		if hk != "" && !strings.EqualFold(hk, "Subject") && msg.Header.Get(hk) != "" {
			var dec mime.WordDecoder
			// Mail trims the white space around a header's value.
			if got, err := dec.DecodeHeader(msg.Header.Get(hk)); err != nil || strings.TrimSpace(got) != strings.TrimSpace(hv) {
				t.Fatalf("header %s: %q (%v), want %q", hk, got, err, hv)
			}
		}
		mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
		if err != nil {
			t.Fatalf("Content-Type %q: %v", msg.Header.Get("Content-Type"), err)
		}
		if mt != "multipart/mixed" {
			got, err := io.ReadAll(quotedprintable.NewReader(msg.Body))
			if err != nil {
				t.Fatal(err)
			}
			if want := crlf(payload); !bytes.Equal(got, want) {
				t.Fatalf("inline text %q, want %q", got, want)
			}
			return
		}
		r := multipart.NewReader(msg.Body, params["boundary"])
		if _, err := r.NextPart(); err != nil {
			t.Fatal(err)
		}
		att, err := r.NextPart()
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(att)
		got, err := io.ReadAll(base64.NewDecoder(base64.StdEncoding, bytes.NewReader(raw)))
		if err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("attachment differs (%v)", err)
		}
	})
}

// crlf writes every line break of text (CRLF, LF or a lone CR) as CRLF,
// as quoted-printable text carries them.
func crlf(p []byte) []byte {
	s := strings.ReplaceAll(string(p), "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	return []byte(strings.ReplaceAll(s, "\n", "\r\n"))
}
