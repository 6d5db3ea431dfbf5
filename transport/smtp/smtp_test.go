package smtp_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"math/big"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/textproto"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-gw/courier/internal/testkit/testcert"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/clocktest"
	"github.com/courier-gw/courier/internal/testkit/mailsink"
	smtptransport "github.com/courier-gw/courier/transport/smtp"
)

var now = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func newTransport(t *testing.T, o smtptransport.Options) *smtptransport.Transport {
	t.Helper()
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Clock = clocktest.New(now)
	o.Hostname = "courier.test"
	tr := smtptransport.New(o)
	t.Cleanup(tr.Close)
	return tr
}

func endpoint(addr string) *courier.Endpoint {
	e := courier.NewEndpoint("ops-mail", courier.TransportSMTP)
	e.Timeout = 5 * time.Second
	e.Settings = &smtptransport.Settings{Addr: addr, From: "courier@example.org", To: []string{"ops@example.org", "erp@example.org"}, StartTLS: "auto"}
	return e
}

func send(t *testing.T, tr *smtptransport.Transport, e *courier.Endpoint, m *courier.Message) courier.Result {
	t.Helper()
	return tr.Send(context.Background(), courier.Delivery{Message: m, Endpoint: e, Attempt: 3})
}

func parse(t *testing.T, data []byte) *mail.Message {
	t.Helper()
	msg, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("received DATA is no mail: %v\n%s", err, data)
	}
	return msg
}

func TestTextTravelsInline(t *testing.T) {
	t.Parallel()
	srv := mailsink.MustStart(t, mailsink.Options{})
	tr := newTransport(t, smtptransport.Options{})
	m := &courier.Message{ID: "inv-1", Type: "invoice", Payload: []byte("Invoice 1\nTotal: 42 €\n" + strings.Repeat("long line ", 20)),
		ContentType: "text/plain", Headers: map[string]string{"X-Tenant": "acme", "Cc": "someone@else.example", "Reply-To": "billing@acme.example"}}
	res := send(t, tr, endpoint(srv.Addr()), m)
	if !res.Delivered() || res.Status != 250 {
		t.Fatalf("result %+v", res)
	}
	mails := srv.Mails()
	if len(mails) != 1 {
		t.Fatalf("%d mails, want 1", len(mails))
	}
	got := mails[0]
	if got.From != "courier@example.org" || strings.Join(got.To, ",") != "ops@example.org,erp@example.org" || got.TLS {
		t.Errorf("envelope %+v", got)
	}
	msg := parse(t, got.Data)
	for k, want := range map[string]string{
		"From": "courier@example.org", "To": "ops@example.org, erp@example.org",
		"Subject": "invoice inv-1", "Message-Id": "<inv-1.courier@courier.test>",
		"Courier-Message-Id": "inv-1", "Courier-Type": "invoice", "Courier-Attempt": "3",
		"Content-Type": "text/plain; charset=utf-8", "Content-Transfer-Encoding": "quoted-printable",
		"X-Tenant": "acme", "Reply-To": "billing@acme.example", "Cc": "", "Date": "Sat, 21 Nov 2026 10:00:00 +0000",
		"Auto-Submitted": "auto-generated", "Mime-Version": "1.0",
	} {
		if v := msg.Header.Get(k); v != want {
			t.Errorf("header %s = %q, want %q", k, v, want)
		}
	}
	body, _ := io.ReadAll(quotedprintable.NewReader(msg.Body))
	if want := strings.ReplaceAll(string(m.Payload), "\n", "\r\n"); string(body) != want {
		t.Errorf("body %q, want %q", body, want)
	}
	for _, line := range strings.Split(string(got.Data), "\r\n") {
		if len(line) > 78 {
			t.Errorf("line of %d characters: %q", len(line), line)
		}
	}
}

func TestOtherContentIsAnAttachment(t *testing.T) {
	t.Parallel()
	srv := mailsink.MustStart(t, mailsink.Options{})
	tr := newTransport(t, smtptransport.Options{})
	pdf := make([]byte, 5000)
	rand.Read(pdf)
	for _, tc := range []struct {
		id, ct, filename string
		payload          []byte
	}{
		{"doc:7", "application/pdf", "doc_7.pdf", pdf},
		{"ord-1", "application/json", "ord-1.json", []byte(`{"order":1}` + "\n")},
		{"raw-1", "", "raw-1.bin", []byte{0, 1, 2, 0xff}},
		{"latin-1", "text/plain", "latin-1.bin", []byte("caf\xe9")}, // no charset and no UTF-8
	} {
		m := &courier.Message{ID: tc.id, Type: "document", Payload: tc.payload, ContentType: tc.ct}
		if res := send(t, tr, endpoint(srv.Addr()), m); !res.Delivered() {
			t.Fatalf("%s: %+v", tc.id, res)
		}
		mails := srv.Mails()
		msg := parse(t, mails[len(mails)-1].Data)
		if got := msg.Header.Get("Courier-Message-Id"); got != tc.id {
			t.Errorf("%s: Courier-Message-Id %q", tc.id, got)
		}
		mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
		if err != nil || mt != "multipart/mixed" {
			t.Fatalf("%s: Content-Type %q", tc.id, msg.Header.Get("Content-Type"))
		}
		r := multipart.NewReader(msg.Body, params["boundary"])
		text, err := r.NextPart()
		if err != nil || !strings.HasPrefix(text.Header.Get("Content-Type"), "text/plain") {
			t.Fatalf("%s: first part %v %v", tc.id, text, err)
		}
		att, err := r.NextPart()
		if err != nil {
			t.Fatal(err)
		}
		if att.FileName() != tc.filename {
			t.Errorf("%s: file name %q, want %q", tc.id, att.FileName(), tc.filename)
		}
		wantCT := tc.ct
		if wantCT == "" {
			wantCT = "application/octet-stream"
		}
		if got := att.Header.Get("Content-Type"); got != wantCT {
			t.Errorf("%s: attachment type %q, want %q", tc.id, got, wantCT)
		}
		// multipart.Part decodes quoted-printable but not base64.
		if att.Header.Get("Content-Transfer-Encoding") != "base64" {
			t.Fatalf("%s: encoding %q", tc.id, att.Header.Get("Content-Transfer-Encoding"))
		}
		raw, _ := io.ReadAll(att)
		got, err := decodeBase64(raw)
		if err != nil || !bytes.Equal(got, tc.payload) {
			t.Errorf("%s: attachment differs from the payload (%v)", tc.id, err)
		}
	}
}

func TestTemporaryFailureThenAccepted(t *testing.T) {
	t.Parallel()
	srv := mailsink.MustStart(t, mailsink.Options{})
	srv.ScriptData(mailsink.Reply(451, [3]int{4, 3, 0}, "try again later"), nil)
	tr := newTransport(t, smtptransport.Options{})
	m := &courier.Message{ID: "inv-1", Type: "invoice", Payload: []byte("hello"), ContentType: "text/plain"}
	res := send(t, tr, endpoint(srv.Addr()), m)
	if res.Class != courier.ClassTransport || res.Status != 451 || res.Response != "451 4.3.0 try again later" ||
		res.Error != "SMTP 451 4.3.0 try again later after end of DATA" {
		t.Fatalf("first attempt: %+v, want transport 451", res)
	}
	if len(srv.Mails()) != 0 {
		t.Fatal("a refused mail was kept")
	}
	res = send(t, tr, endpoint(srv.Addr()), m)
	if !res.Delivered() {
		t.Fatalf("second attempt: %+v", res)
	}
	if mails := srv.Mails(); len(mails) != 1 || !bytes.Contains(mails[0].Data, []byte("hello")) {
		t.Fatalf("mails %+v", mails)
	}
}

func TestPermanentRefusalIsRejected(t *testing.T) {
	t.Parallel()
	srv := mailsink.MustStart(t, mailsink.Options{})
	srv.RefuseRcpt("erp@example.org", mailsink.Reply(550, [3]int{5, 1, 1}, "no such user"))
	tr := newTransport(t, smtptransport.Options{})
	res := send(t, tr, endpoint(srv.Addr()), &courier.Message{ID: "inv-1", Type: "invoice", Payload: []byte("x"), ContentType: "text/plain"})
	if res.Class != courier.ClassRejected || res.Status != 550 || !strings.Contains(res.Error, "after RCPT TO erp@example.org") {
		t.Fatalf("%+v, want rejected 550 at RCPT", res)
	}
	if n := len(srv.Mails()); n != 0 {
		t.Errorf("%d mails; no recipient may get it when one is refused", n)
	}
	// 5xx to the data itself is rejected as well.
	srv2 := mailsink.MustStart(t, mailsink.Options{})
	srv2.ScriptData(mailsink.Reply(554, [3]int{5, 6, 0}, "content refused"))
	res = send(t, tr, endpoint(srv2.Addr()), &courier.Message{ID: "inv-2", Type: "invoice", Payload: []byte("x"), ContentType: "text/plain"})
	if res.Class != courier.ClassRejected || res.Status != 554 {
		t.Fatalf("%+v, want rejected 554", res)
	}
}

// TestStartTLSAndAuth logs in over STARTTLS to a server that offers the
// usual mechanisms and to one that offers LOGIN only.
func TestStartTLSAndAuth(t *testing.T) {
	t.Parallel()
	serverTLS, roots := selfSigned(t)
	m := &courier.Message{ID: "inv-1", Type: "invoice", Payload: []byte("x"), ContentType: "text/plain"}
	for _, tc := range []struct {
		name       string
		mechanisms []string
	}{
		{"usual mechanisms", nil},
		{"LOGIN only", []string{"LOGIN"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := mailsink.MustStart(t, mailsink.Options{TLS: serverTLS, Users: map[string]string{"courier": "s3cret"}, Mechanisms: tc.mechanisms})
			tr := newTransport(t, smtptransport.Options{TLSConfig: &tls.Config{RootCAs: roots}})
			e := endpoint(srv.Addr())
			smtptransport.Of(e).Username, smtptransport.Of(e).Password = "courier", "s3cret"
			if res := send(t, tr, e, m); !res.Delivered() {
				t.Fatalf("%+v", res)
			}
			if mails := srv.Mails(); len(mails) != 1 || !mails[0].TLS || mails[0].User != "courier" {
				t.Fatalf("mails %+v, want one over TLS by user courier", mails)
			}

			// A wrong password is the endpoint's problem, not the message's:
			// it is retried, not suspended.
			smtptransport.Of(e).Password = "wrong"
			if res := send(t, tr, e, m); res.Class != courier.ClassTransport || res.Status != 535 || !strings.Contains(res.Error, "after AUTH") {
				t.Errorf("wrong password: %+v, want transport 535", res)
			}

			// Without the private root the certificate is not trusted.
			untrusting := newTransport(t, smtptransport.Options{})
			if res := send(t, untrusting, e, m); res.Class != courier.ClassTLS || !strings.Contains(res.Error, "unknown authority") {
				t.Errorf("untrusted certificate: %+v, want tls", res)
			}
			// starttls: never does not try it, and the server refuses AUTH
			// in the clear.
			smtptransport.Of(e).StartTLS, smtptransport.Of(e).Password = "never", "s3cret"
			if res := send(t, untrusting, e, m); res.Class != courier.ClassTransport || !strings.Contains(res.Error, "AUTH") {
				t.Errorf("no STARTTLS: %+v, want transport about AUTH", res)
			}
		})
	}
}

func TestStartTLSRequiredButNotOffered(t *testing.T) {
	t.Parallel()
	srv := mailsink.MustStart(t, mailsink.Options{})
	e := endpoint(srv.Addr())
	smtptransport.Of(e).StartTLS = "always"
	res := send(t, newTransport(t, smtptransport.Options{}), e, &courier.Message{ID: "a", Type: "t", Payload: []byte("x")})
	if res.Class != courier.ClassTLS || !strings.Contains(res.Error, "does not offer STARTTLS") {
		t.Fatalf("%+v", res)
	}
	if len(srv.Mails()) != 0 {
		t.Fatal("mail sent in the clear")
	}
}

// TestStartTLSInTheSameSession: with starttls auto, courier greets with its
// own name (some relays refuse "localhost"), takes up STARTTLS where the
// server offers it on the same connection, and greets again over TLS,
// where AUTH is offered. A client that can only upgrade by reconnecting,
// or that greets as localhost before STARTTLS, fails here.
func TestStartTLSInTheSameSession(t *testing.T) {
	t.Parallel()
	serverTLS, roots := selfSigned(t)
	type session struct {
		conn     int
		commands []string
	}
	sessions := make(chan session, 4)
	var conns atomic.Int32
	addr := listen(t, func(c net.Conn) {
		s := session{conn: int(conns.Add(1))}
		defer func() { sessions <- s }()
		tp := textproto.NewConn(c)
		tp.PrintfLine("220 mx.test ESMTP")
		secure := false
		for {
			line, err := tp.ReadLine()
			if err != nil {
				return
			}
			verb, _, _ := strings.Cut(line, " ")
			if strings.EqualFold(verb, "AUTH") {
				line = "AUTH …" // not the credentials
			}
			s.commands = append(s.commands, line)
			switch strings.ToUpper(verb) {
			case "EHLO":
				if secure {
					tp.PrintfLine("250-mx.test\r\n250 AUTH PLAIN")
				} else {
					tp.PrintfLine("250-mx.test\r\n250 STARTTLS")
				}
			case "STARTTLS":
				tp.PrintfLine("220 go ahead")
				tc := tls.Server(c, serverTLS)
				if tc.Handshake() != nil {
					return
				}
				c, secure = tc, true
				tp = textproto.NewConn(tc)
			case "AUTH":
				tp.PrintfLine("235 ok")
			case "MAIL", "RCPT":
				tp.PrintfLine("250 ok")
			case "DATA":
				tp.PrintfLine("354 go on")
				if _, err := tp.ReadDotBytes(); err != nil {
					return
				}
				tp.PrintfLine("250 queued")
			case "QUIT":
				tp.PrintfLine("221 bye")
				return
			default:
				tp.PrintfLine("502 not here")
			}
		}
	})
	tr := newTransport(t, smtptransport.Options{TLSConfig: &tls.Config{RootCAs: roots}})
	e := endpoint(addr)
	smtptransport.Of(e).To = []string{"ops@example.org"}
	smtptransport.Of(e).Username, smtptransport.Of(e).Password = "courier", "s3cret"
	if res := send(t, tr, e, &courier.Message{ID: "inv-1", Type: "invoice", Payload: []byte("x"), ContentType: "text/plain"}); !res.Delivered() {
		t.Fatalf("%+v", res)
	}
	got := <-sessions
	want := []string{"EHLO courier.test", "STARTTLS", "EHLO courier.test", "AUTH …",
		"MAIL FROM:<courier@example.org>", "RCPT TO:<ops@example.org>", "DATA", "QUIT"}
	if got.conn != 1 || !slices.Equal(got.commands, want) {
		t.Fatalf("connection %d said %q; want connection 1 to say %q", got.conn, got.commands, want)
	}
}

func TestConnectionFailures(t *testing.T) {
	t.Parallel()
	tr := newTransport(t, smtptransport.Options{})
	m := &courier.Message{ID: "a", Type: "t", Payload: []byte("x")}

	// Nothing listens.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := ln.Addr().String()
	ln.Close()

	// Hangs up at once.
	hangup := listen(t, func(c net.Conn) { c.Close() })
	// Greets, then says nothing more.
	silent := listen(t, func(c net.Conn) {
		io.WriteString(c, "220 mx.test ESMTP\r\n")
		io.Copy(io.Discard, c)
	})
	// Answers with garbage.
	garbage := listen(t, func(c net.Conn) {
		io.WriteString(c, "hello there\r\n")
		io.Copy(io.Discard, c)
	})

	for _, tc := range []struct {
		name, addr string
		class      courier.ErrorClass
	}{
		{"refused", closed, courier.ClassConnectRefused},
		{"hang-up", hangup, courier.ClassConnectionClosed},
		{"silent", silent, courier.ClassTimeout},
		{"garbage", garbage, courier.ClassProtocol},
		{"unknown host", "host.invalid:25", courier.ClassDNS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := endpoint(tc.addr)
			e.Timeout = 300 * time.Millisecond
			if res := send(t, tr, e, m); res.Class != tc.class {
				t.Errorf("got %s (%s), want %s", res.Class, res.Error, tc.class)
			}
		})
	}
}

func TestNoticeIsReadable(t *testing.T) {
	t.Parallel()
	srv := mailsink.MustStart(t, mailsink.Options{})
	tr := newTransport(t, smtptransport.Options{PublicURL: "https://courier.example.org/"})
	body, _ := json.Marshal(courier.NoticeBody{
		Notice: "escalation", Text: "message inv-1 (invoice, route acme) is not delivered after 24h0m0s",
		MessageID: "inv-1", Type: "invoice", Route: "acme", State: courier.StateQueued, Attempts: 7,
		Endpoint: "acme-primary", LastError: "HTTP 503 Service Unavailable", LastClass: courier.ClassHTTP5xx,
		CreatedAt: now.Add(-24 * time.Hour), AgeSeconds: 24 * 3600, NoticeAt: now,
	})
	m := &courier.Message{ID: "inv-1.escalation.1.ops-mail", Type: courier.NoticeType, Payload: body, ContentType: "application/json",
		Headers: map[string]string{"Courier-Notice": "escalation", "Courier-Message-Id": "inv-1"}}
	if res := send(t, tr, endpoint(srv.Addr()), m); !res.Delivered() {
		t.Fatalf("%+v", res)
	}
	msg := parse(t, srv.Mails()[0].Data)
	if got, want := msg.Header.Get("Subject"), "[courier] invoice inv-1 not delivered after 24h0m0s (route acme)"; got != want {
		t.Errorf("Subject %q, want %q", got, want)
	}
	if msg.Header.Get("Courier-Notice") != "escalation" || msg.Header.Get("Courier-Message-Id") != m.ID ||
		msg.Header.Get("Courier-Type") != courier.NoticeType || !strings.HasPrefix(msg.Header.Get("Content-Type"), "text/plain") {
		t.Errorf("header %v", msg.Header)
	}
	text, _ := io.ReadAll(quotedprintable.NewReader(msg.Body))
	for _, want := range []string{
		"is not delivered after 24h0m0s",
		"Message      inv-1\r\n",
		"Route        acme\r\n",
		"Waiting      24h0m0s, since 2026-11-20 10:00:00 UTC\r\n",
		"Attempts     7\r\n",
		"Endpoint     acme-primary\r\n",
		"Last error   http_5xx: HTTP 503 Service Unavailable\r\n",
		"Dashboard    https://courier.example.org/ui/messages/inv-1\r\n",
	} {
		if !strings.Contains(string(text), want) {
			t.Errorf("notice lacks %q:\n%s", want, text)
		}
	}

	// Without a public URL there is no link.
	plain := newTransport(t, smtptransport.Options{})
	if res := send(t, plain, endpoint(srv.Addr()), m); !res.Delivered() {
		t.Fatal(res)
	}
	if data := srv.Mails()[1].Data; bytes.Contains(data, []byte("Dashboard")) {
		t.Errorf("a link without a public URL:\n%s", data)
	}
}

func TestCompose(t *testing.T) {
	t.Parallel()
	e := endpoint("mx:25")
	for _, tc := range []struct {
		name string
		m    *courier.Message
		want []string // lines of the header that must be there
		bad  bool
	}{
		{"subject from the message", &courier.Message{ID: "a", Type: "t", ContentType: "text/plain", Headers: map[string]string{"subject": "Rechnung"}},
			[]string{"Subject: Rechnung\r\n"}, false},
		{"non-ASCII header", &courier.Message{ID: "a", Type: "t", ContentType: "text/plain", Headers: map[string]string{"X-Name": "Müller"}},
			[]string{"X-Name: =?utf-8?q?M=C3=BCller?=\r\n"}, false},
		{"id with a colon", &courier.Message{ID: "urn:x", Type: "t", ContentType: "text/plain"},
			[]string{"Message-ID: <", ".courier@courier.test>\r\n", "Courier-Message-Id: urn:x\r\n"}, false},
		{"addressing is the endpoint's", &courier.Message{ID: "a", Type: "t", ContentType: "text/plain", Headers: map[string]string{"Bcc": "x@y.example", "To": "x@y.example"}},
			[]string{"To: ops@example.org, erp@example.org\r\n"}, false},
		{"declared charset", &courier.Message{ID: "a", Type: "t", ContentType: "text/plain; charset=iso-8859-1", Payload: []byte("caf\xe9")},
			[]string{"Content-Type: text/plain; charset=iso-8859-1\r\n"}, false},
		{"long value", &courier.Message{ID: "a", Type: "t", ContentType: "text/plain", Headers: map[string]string{"X-Long": strings.Repeat("abc", 400)}},
			[]string{"X-Long: =?utf-8?b?YWJj", "?=\r\n =?utf-8?b?"}, false},
		{"long non-ASCII value", &courier.Message{ID: "a", Type: "t", ContentType: "text/plain", Headers: map[string]string{"X-Name": strings.Repeat("ü", 100)}},
			[]string{"X-Name: =?utf-8?q?", "?=\r\n =?utf-8?q?"}, false},
		{"place in its key's order", &courier.Message{ID: "a", Type: "t", ContentType: "text/plain", OrderingKey: "k", Sequence: 7, PreviousID: "z"},
			[]string{"Courier-Sequence: 7\r\n", "Courier-Previous-Id: z\r\n"}, false},
		{"broken content type", &courier.Message{ID: "a", Type: "t", ContentType: "text/"}, nil, true},
		{"longest header name", &courier.Message{ID: "a", Type: "t", ContentType: "text/plain", Headers: map[string]string{strings.Repeat("r", 921): strings.Repeat("ü", 40)}},
			[]string{strings.Repeat("r", 921) + ": =?utf-8?q?"}, false},
		{"header name too long for a line", &courier.Message{ID: "a", Type: "t", ContentType: "text/plain", Headers: map[string]string{strings.Repeat("r", 922): "0"}}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := smtptransport.Compose(courier.Delivery{Message: tc.m, Endpoint: e, Attempt: 1}, now, "courier.test", "")
			if (err != nil) != tc.bad {
				t.Fatalf("err %v", err)
			}
			head, _, _ := strings.Cut(string(got), "\r\n\r\n")
			for _, w := range tc.want {
				if !strings.Contains(head+"\r\n", w) {
					t.Errorf("header lacks %q:\n%s", w, head)
				}
			}
			if strings.Contains(head, "x@y.example") {
				t.Errorf("the message's addressing got in:\n%s", head)
			}
			for _, line := range strings.Split(head, "\r\n") {
				if len(line) > 998 {
					t.Errorf("a header line of %d bytes", len(line))
				}
			}
		})
	}
}

// listen serves every connection with handle, for the failure cases.
func listen(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// selfSigned makes a certificate for 127.0.0.1 and the pool that trusts it.
func selfSigned(t *testing.T) (*tls.Config, *x509.CertPool) {
	t.Helper()
	c := testcert.New(t, &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mx.test"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, nil)
	pool := x509.NewCertPool()
	pool.AddCert(c.Cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{c.DER}, PrivateKey: c.Key}}}, pool
}

func decodeBase64(p []byte) ([]byte, error) {
	return io.ReadAll(base64.NewDecoder(base64.StdEncoding, bytes.NewReader(p)))
}

// Each delivery of a message has its own Message-ID, as its webhook-id over
// HTTP: a published message's delivery to each subscription, each step of a
// workflow and its compensation; every attempt of one delivery the same.
func TestMessageIDIsTheDelivery(t *testing.T) {
	t.Parallel()
	e := endpoint("mx:25")
	msg := func(sub string) *courier.Message {
		return &courier.Message{ID: "o-1", Type: "t", ContentType: "text/plain", Payload: []byte("x"), Subscription: sub}
	}
	deliveries := []courier.Delivery{
		{Message: msg("")},
		{Message: msg("erp")},
		{Message: msg("crm")},
		{Message: msg(""), Step: &courier.StepContext{Step: 1, Steps: 2}},
		{Message: msg(""), Step: &courier.StepContext{Step: 2, Steps: 2}},
		{Message: msg(""), Step: &courier.StepContext{Step: 1, Steps: 2, Compensate: true}},
	}
	seen := map[string]int{}
	for i, d := range deliveries {
		d.Endpoint = e
		var ids []string
		for attempt := 1; attempt <= 2; attempt++ {
			d.Attempt = attempt
			mail, err := smtptransport.Compose(d, now, "courier.test", "")
			if err != nil {
				t.Fatal(err)
			}
			_, rest, _ := strings.Cut(string(mail), "Message-ID: ")
			id, _, _ := strings.Cut(rest, "\r\n")
			ids = append(ids, id)
		}
		if ids[0] != ids[1] {
			t.Errorf("delivery %d (%s): attempts have Message-IDs %q and %q", i, d.DeliveryID(), ids[0], ids[1])
		}
		if j, ok := seen[ids[0]]; ok {
			t.Errorf("deliveries %d and %d share the Message-ID %s", j, i, ids[0])
		}
		seen[ids[0]] = i
	}
}
