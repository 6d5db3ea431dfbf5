package http_test

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/sink"
	httptransport "github.com/courier-gw/courier/transport/http"
)

// now is the fixed time of every attempt in these tests: webhook-timestamp
// and the reference point of Retry-After dates.
var now = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

func newTransport(t *testing.T, o httptransport.Options) *httptransport.Transport {
	t.Helper()
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = fixedClock{now}
	}
	if o.AllowNetworks == nil {
		// The receivers of these tests are on loopback, which the SSRF
		// guard blocks by default; guard_test.go tests the guard itself.
		o.AllowNetworks = loopback
	}
	tr := httptransport.New(o)
	t.Cleanup(tr.Close)
	return tr
}

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

func mustSink(t *testing.T) *sink.Sink {
	t.Helper()
	s, err := sink.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func endpoint(name, url string) *courier.Endpoint {
	return &courier.Endpoint{
		Name: name, Transport: courier.TransportHTTP, Timeout: 5 * time.Second,
		HTTP: courier.HTTPTarget{URL: url},
	}
}

func message() *courier.Message {
	return &courier.Message{
		ID: "msg-1", Type: "invoice", Route: "acme",
		Payload:     []byte(`{"total":42}`),
		ContentType: "application/json",
		Headers:     map[string]string{"X-Tenant": "acme"},
	}
}

func send(t *testing.T, tr *httptransport.Transport, e *courier.Endpoint, m *courier.Message) courier.Result {
	t.Helper()
	return tr.Send(context.Background(), courier.Delivery{Message: m, Endpoint: e, Attempt: 1})
}

func wantClass(t *testing.T, res courier.Result, want courier.ErrorClass) {
	t.Helper()
	t.Logf("%s: %s", res.Class, res.Error)
	if res.Class != want {
		t.Fatalf("class = %q, want %q (result %+v)", res.Class, want, res)
	}
}

func wantError(t *testing.T, res courier.Result, substr string) {
	t.Helper()
	if !strings.Contains(res.Error, substr) {
		t.Fatalf("error %q does not contain %q", res.Error, substr)
	}
}

// rawServer accepts connections on loopback and hands each to serve, for
// receivers that misbehave in ways no HTTP server library would.
// headServer is a receiver that answers 204 to one request on each
// connection and hands over the request's head, as it came on the wire.
func headServer(t *testing.T) (addr string, heads <-chan string) {
	t.Helper()
	got := make(chan string, 1)
	addr = rawServer(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		var head strings.Builder
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			head.WriteString(line)
			if line == "\r\n" {
				break
			}
		}
		got <- head.String()
		io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
	})
	return addr, got
}

func rawServer(t *testing.T, serve func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				serve(c)
			})
		}
	})
	return ln.Addr().String()
}

// readRequest reads one request from br, body included.
func readRequest(br *bufio.Reader) (*http.Request, []byte, error) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, nil, err
	}
	body, err := io.ReadAll(req.Body)
	return req, body, err
}

func TestRequestCarriesTheHeadersOfDesign8(t *testing.T) {
	t.Parallel()
	s := mustSink(t)
	tr := newTransport(t, httptransport.Options{})
	m := message()
	m.Headers = map[string]string{
		"X-Tenant":          "acme",
		"webhook-id":        "forged",      // the transport's own: left out
		"Courier-Type":      "forged",      // likewise
		"content-type":      "text/forged", // the message's ContentType decides
		"Courier-Something": "forged",
	}
	e := endpoint("headers", s.URL()+"/in")
	res := tr.Send(context.Background(), courier.Delivery{Message: m, Endpoint: e, Attempt: 3})
	if !res.Delivered() || res.Status != 204 {
		t.Fatalf("result = %+v, want delivered with 204", res)
	}

	arr := s.Arrivals("/in")
	if len(arr) != 1 {
		t.Fatalf("%d arrivals, want 1", len(arr))
	}
	a := arr[0]
	if a.Method != "POST" {
		t.Errorf("method = %s, want POST", a.Method)
	}
	if string(a.Body) != string(m.Payload) {
		t.Errorf("body = %q, want %q", a.Body, m.Payload)
	}
	want := map[string]string{
		"Content-Type":      "application/json",
		"Webhook-Id":        "msg-1",
		"Webhook-Timestamp": strconv.FormatInt(now.Unix(), 10),
		"Courier-Attempt":   "3",
		"Courier-Type":      "invoice",
		"X-Tenant":          "acme",
		"User-Agent":        "courier/1",
	}
	for k, v := range want {
		if got := a.Header.Values(k); len(got) != 1 || got[0] != v {
			t.Errorf("%s = %q, want exactly %q", k, got, v)
		}
	}
	for _, k := range []string{"Webhook-Signature", "Courier-Something", "Accept-Encoding"} {
		if got := a.Header.Values(k); len(got) != 0 {
			t.Errorf("%s = %q, want none", k, got)
		}
	}
}

func TestHeaderNamesOnTheWire(t *testing.T) {
	t.Parallel()
	addr, got := headServer(t)
	tr := newTransport(t, httptransport.Options{UserAgent: "courier-test/9"})
	e := endpoint("wire", "http://"+addr+"/in")
	e.HTTP.Method = "put"
	e.HTTP.Secrets = []string{"s3cret"}
	res := tr.Send(context.Background(), courier.Delivery{Message: message(), Endpoint: e, Attempt: 2})
	if !res.Delivered() {
		t.Fatalf("result = %+v", res)
	}
	head := <-got
	for _, line := range []string{
		"PUT /in HTTP/1.1\r\n",
		"webhook-id: msg-1\r\n",
		"webhook-timestamp: " + strconv.FormatInt(now.Unix(), 10) + "\r\n",
		"webhook-signature: v1,",
		"Courier-Attempt: 2\r\n",
		"Courier-Type: invoice\r\n",
		"Content-Type: application/json\r\n",
		"User-Agent: courier-test/9\r\n",
		"X-Tenant: acme\r\n",
	} {
		if !strings.Contains(head, line) {
			t.Errorf("request head lacks %q:\n%s", line, head)
		}
	}
}

// The request head is the same for the same message, line for line: names
// that differ only in case go in the order of their spellings, and a message
// whose first User-Agent is empty gets the transport's.
func TestRequestHeadOrder(t *testing.T) {
	t.Parallel()
	addr, got := headServer(t)
	tr := newTransport(t, httptransport.Options{})
	m := message()
	m.Headers = map[string]string{"x-b": "1", "X-B": "2", "X-a": "3", "User-Agent": "", "user-agent": "erp/7", "Accept": "*/*"}
	e := endpoint("order", "http://"+addr+"/in")
	e.HTTP.Secrets = []string{"s3cret"}
	step := &courier.StepContext{Step: 3, Steps: 12, Responses: map[int]string{2: `"two"`, 10: `"ten"`}}
	res := tr.Send(context.Background(), courier.Delivery{Message: m, Endpoint: e, Attempt: 1, Step: step})
	if !res.Delivered() {
		t.Fatalf("result = %+v", res)
	}
	head := <-got
	want := strings.Join([]string{
		"POST /in HTTP/1.1",
		"User-Agent: courier/1",
		"Host: " + addr,
		"Content-Type: application/json",
		"Content-Length: 12",
		"Accept: */*",
		"Courier-Attempt: 1",
		"Courier-Step: 3/12",
		`Courier-Step-10-Response: "ten"`,
		`Courier-Step-2-Response: "two"`,
		"Courier-Type: invoice",
		"X-A: 3",
		"X-B: 2",
		"X-B: 1",
		"webhook-id: msg-1.3",
		"webhook-signature: v1,Di8sZ5MYqiVpQdda2GRpPQs7oEg22H0f6p/0AGUECEU=",
		"webhook-timestamp: " + strconv.FormatInt(now.Unix(), 10),
		"", "",
	}, "\r\n")
	if head != want {
		t.Fatalf("request head:\n%s\nwant:\n%s", head, want)
	}
}

func TestMessageMaySetUserAgent(t *testing.T) {
	t.Parallel()
	s := mustSink(t)
	tr := newTransport(t, httptransport.Options{})
	m := message()
	m.Headers = map[string]string{"user-agent": "erp/7"}
	m.ContentType = ""
	if res := send(t, tr, endpoint("ua", s.URL()+"/ua"), m); !res.Delivered() {
		t.Fatalf("result = %+v", res)
	}
	a := s.Arrivals("/ua")[0]
	if got := a.Header.Values("User-Agent"); len(got) != 1 || got[0] != "erp/7" {
		t.Errorf("User-Agent = %q, want erp/7", got)
	}
	if got := a.Header.Get("Content-Type"); got != "application/octet-stream" {
		t.Errorf("Content-Type without one on the message = %q", got)
	}
}

// verifyStandardWebhook checks a request the way a receiver following the
// Standard Webhooks spec does, written from the spec and sharing no code
// with the transport: recompute HMAC-SHA256 over "id.timestamp.body" with
// the secret's key, compare in constant time with every v1 entry, and
// refuse timestamps outside the tolerance.
func verifyStandardWebhook(secret string, h http.Header, body []byte, at time.Time, tolerance time.Duration) error {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return errors.New("missing webhook headers")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("bad timestamp %q", ts)
	}
	if d := at.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("timestamp %s outside the tolerance", ts)
	}
	key := []byte(secret)
	if rest, ok := strings.CutPrefix(secret, "whsec_"); ok {
		if key, err = base64.StdEncoding.DecodeString(rest); err != nil {
			return err
		}
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "." + string(body)))
	expected := mac.Sum(nil)
	for _, entry := range strings.Split(sigs, " ") {
		version, sig, ok := strings.Cut(entry, ",")
		if !ok || version != "v1" {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(sig)
		if err != nil {
			continue
		}
		if hmac.Equal(raw, expected) {
			return nil
		}
	}
	return errors.New("no signature matches")
}

func TestSignatureVerifiesPerStandardWebhooks(t *testing.T) {
	t.Parallel()
	s := mustSink(t)
	tr := newTransport(t, httptransport.Options{})
	whsec := "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	raw := "a plain shared secret"
	e := endpoint("signed", s.URL()+"/signed")
	e.HTTP.Secrets = []string{whsec, raw} // rotation: old and new
	if res := send(t, tr, e, message()); !res.Delivered() {
		t.Fatalf("result = %+v", res)
	}
	a := s.Arrivals("/signed")[0]

	if n := len(strings.Fields(a.Header.Get("webhook-signature"))); n != 2 {
		t.Fatalf("webhook-signature has %d entries, want 2: %q", n, a.Header.Get("webhook-signature"))
	}
	const tolerance = 5 * time.Minute
	for _, secret := range []string{whsec, raw} {
		if err := verifyStandardWebhook(secret, a.Header, a.Body, now.Add(time.Minute), tolerance); err != nil {
			t.Errorf("a receiver holding %q: %v", secret, err)
		}
	}
	if err := verifyStandardWebhook("whsec_"+base64.StdEncoding.EncodeToString([]byte("another key")), a.Header, a.Body, now, tolerance); err == nil {
		t.Error("a wrong secret verified")
	}
	if err := verifyStandardWebhook(raw, a.Header, append([]byte("x"), a.Body...), now, tolerance); err == nil {
		t.Error("a changed body verified")
	}
	if err := verifyStandardWebhook(raw, a.Header, a.Body, now.Add(10*time.Minute), tolerance); err == nil {
		t.Error("a stale timestamp verified")
	}
}

// TestSignatureMatchesTheSpecVector reproduces the test vector published
// with the Standard Webhooks reference libraries, over a real request.
func TestSignatureMatchesTheSpecVector(t *testing.T) {
	t.Parallel()
	s := mustSink(t)
	tr := newTransport(t, httptransport.Options{Clock: fixedClock{time.Unix(1614265330, 0)}})
	e := endpoint("vector", s.URL()+"/vector")
	e.HTTP.Secrets = []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}
	m := &courier.Message{ID: "msg_p5jXN8AQM9LWM0D4loKWxJek", Type: "t", Payload: []byte(`{"test": 2432232314}`), ContentType: "application/json"}
	if res := send(t, tr, e, m); !res.Delivered() {
		t.Fatalf("result = %+v", res)
	}
	a := s.Arrivals("/vector")[0]
	if got, want := a.Header.Get("webhook-signature"), "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("webhook-signature = %q, want %q", got, want)
	}
	if got := a.Header.Get("webhook-timestamp"); got != "1614265330" {
		t.Fatalf("webhook-timestamp = %q", got)
	}
}

func TestDelivered2xxKeepsStatusAndExcerpt(t *testing.T) {
	t.Parallel()
	s := mustSink(t)
	tr := newTransport(t, httptransport.Options{})
	for _, code := range []int{200, 201, 202, 204, 299} {
		path := fmt.Sprintf("/ok%d", code)
		step := sink.Respond(code)
		if code != 204 {
			step = step.WithBody(`{"accepted":true}`)
		}
		s.Script(path, step)
		res := send(t, tr, endpoint("ok", s.URL()+path), message())
		if !res.Delivered() || res.Status != code || res.Error != "" {
			t.Errorf("%d: result = %+v, want delivered", code, res)
		}
		if code != 204 && res.Response != `{"accepted":true}` {
			t.Errorf("%d: response = %q", code, res.Response)
		}
	}
}

func TestStatusClasses(t *testing.T) {
	t.Parallel()
	s := mustSink(t)
	tr := newTransport(t, httptransport.Options{})
	date := now.Add(90 * time.Second).Format(http.TimeFormat)
	for _, tc := range []struct {
		step       sink.Step
		class      courier.ErrorClass
		err        string
		retryAfter time.Duration
	}{
		{sink.Respond(400).WithBody("bad invoice"), courier.ClassHTTP4xx, "HTTP 400 Bad Request", 0},
		{sink.Respond(404), courier.ClassHTTP4xx, "HTTP 404 Not Found", 0},
		{sink.Respond(410), courier.ClassHTTP4xx, "HTTP 410 Gone", 0},
		{sink.Respond(422), courier.ClassHTTP4xx, "HTTP 422 Unprocessable Entity", 0},
		{sink.Respond(429).WithHeader("Retry-After", "7"), courier.ClassHTTP429, "HTTP 429 Too Many Requests", 7 * time.Second},
		{sink.Respond(429).WithHeader("Retry-After", date), courier.ClassHTTP429, "HTTP 429", 90 * time.Second},
		{sink.Respond(429), courier.ClassHTTP429, "HTTP 429", 0},
		{sink.Respond(500).WithBody("boom"), courier.ClassHTTP5xx, "HTTP 500 Internal Server Error", 0},
		{sink.Respond(500).WithHeader("Retry-After", "30"), courier.ClassHTTP5xx, "HTTP 500", 0}, // only 429 and 503 carry it
		{sink.Respond(502), courier.ClassHTTP5xx, "HTTP 502 Bad Gateway", 0},
		{sink.Respond(503).WithHeader("Retry-After", "120"), courier.ClassHTTP5xx, "HTTP 503 Service Unavailable", 2 * time.Minute},
		{sink.Respond(503).WithHeader("Retry-After", "soon"), courier.ClassHTTP5xx, "HTTP 503", 0},
		{sink.Respond(599), courier.ClassHTTP5xx, "HTTP 599", 0},
	} {
		t.Run(tc.step.String(), func(t *testing.T) {
			path := "/" + strings.NewReplacer(" ", "-").Replace(tc.step.String()) + strconv.Itoa(int(tc.retryAfter))
			s.Script(path, tc.step)
			res := send(t, tr, endpoint("statuses", s.URL()+path), message())
			wantClass(t, res, tc.class)
			wantError(t, res, tc.err)
			if res.RetryAfter != tc.retryAfter {
				t.Errorf("RetryAfter = %v, want %v", res.RetryAfter, tc.retryAfter)
			}
			if res.Status == 0 {
				t.Errorf("Status not set")
			}
		})
	}
	// The receiver's answer is kept for failures too.
	s.Script("/rejected", sink.Respond(422).WithBody(`{"error":"unknown customer"}`))
	res := send(t, tr, endpoint("statuses", s.URL()+"/rejected"), message())
	if res.Response != `{"error":"unknown customer"}` || res.Status != 422 {
		t.Fatalf("result = %+v", res)
	}
}

func TestExcerptIsCutAtOneKiBOnARuneBoundary(t *testing.T) {
	t.Parallel()
	s := mustSink(t)
	tr := newTransport(t, httptransport.Options{})
	// "é" is two bytes; an odd prefix puts one across the 1 KiB mark.
	body := "x" + strings.Repeat("é", 3000)
	s.Script("/long", sink.Respond(200).WithBody(body))
	s.Script("/long500", sink.Respond(500).WithBody(body))
	for _, path := range []string{"/long", "/long500"} {
		res := send(t, tr, endpoint("long", s.URL()+path), message())
		if len(res.Response) > courier.MaxResponseExcerpt || len(res.Response) < courier.MaxResponseExcerpt-3 {
			t.Errorf("%s: excerpt of %d bytes, want just under %d", path, len(res.Response), courier.MaxResponseExcerpt)
		}
		if !utf8.ValidString(res.Response) || !strings.HasPrefix(body, res.Response) {
			t.Errorf("%s: excerpt is not a valid prefix of the body: %q", path, res.Response[len(res.Response)-8:])
		}
	}
	// A long body is read and dropped within the drain bound, so the next
	// attempt reuses the connection.
	if got := s.Conns(); got != 1 {
		t.Errorf("Conns = %d, want 1", got)
	}
}

func TestBinaryResponseIsSummarised(t *testing.T) {
	t.Parallel()
	s := mustSink(t)
	tr := newTransport(t, httptransport.Options{})
	bin := string([]byte{0x89, 'P', 'N', 'G', 0, 0, 0, 0x0d, 0xff, 0xfe})
	s.Script("/bin", sink.Respond(200).WithBody(bin).WithHeader("Content-Type", "image/png"))
	res := send(t, tr, endpoint("bin", s.URL()+"/bin"), message())
	if !res.Delivered() {
		t.Fatalf("result = %+v", res)
	}
	if want := "[image/png body, 10 bytes]"; res.Response != want {
		t.Fatalf("response = %q, want %q", res.Response, want)
	}
}

func TestConnectRefused(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: the kernel answers RST
	tr := newTransport(t, httptransport.Options{})
	res := send(t, tr, endpoint("refused", "http://"+addr+"/in"), message())
	wantClass(t, res, courier.ClassConnectRefused)
	if want := "connection refused by " + addr; res.Error != want {
		t.Fatalf("error = %q, want %q", res.Error, want)
	}
}

// fakeDNS serves DNS on a loopback UDP port: NXDOMAIN for every question,
// or, when silent, no answer at all.
func fakeDNS(t *testing.T, silent bool) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { pc.Close(); <-done })
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if silent || n < 12 {
				continue
			}
			// The question follows the 12-byte header: labels up to a zero
			// byte, then type and class.
			end := 12
			for end < n && buf[end] != 0 {
				end += int(buf[end]) + 1
			}
			end += 5
			if end > n {
				continue
			}
			resp := []byte{buf[0], buf[1], 0x80 | 0x04 | buf[2]&0x01, 0x80 | 3, 0, 1, 0, 0, 0, 0, 0, 0}
			resp = append(resp, buf[12:end]...)
			pc.WriteTo(resp, from)
		}
	}()
	addr := pc.LocalAddr().String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", addr)
	}}
}

func TestDNSOnALoopbackResolver(t *testing.T) {
	t.Parallel()
	t.Run("nxdomain", func(t *testing.T) {
		t.Parallel()
		tr := newTransport(t, httptransport.Options{Resolver: fakeDNS(t, false)})
		res := send(t, tr, endpoint("nx", "http://no-such-host.invalid:8080/in"), message())
		wantClass(t, res, courier.ClassDNS)
		if want := "host no-such-host.invalid not found"; res.Error != want {
			t.Fatalf("error = %q, want %q", res.Error, want)
		}
	})
	t.Run("resolver timeout", func(t *testing.T) {
		t.Parallel()
		tr := newTransport(t, httptransport.Options{Resolver: fakeDNS(t, true), ConnectTimeout: 300 * time.Millisecond})
		res := send(t, tr, endpoint("slowdns", "http://silent-resolver.invalid/in"), message())
		wantClass(t, res, courier.ClassDNS)
		wantError(t, res, "timed out")
	})
}

func TestTLSHandshakeThatNeverCompletesIsAConnectTimeout(t *testing.T) {
	t.Parallel()
	addr := rawServer(t, func(c net.Conn) { io.Copy(io.Discard, c) }) // accepts, never answers
	tr := newTransport(t, httptransport.Options{ConnectTimeout: 300 * time.Millisecond})
	start := time.Now()
	res := send(t, tr, endpoint("tls-stall", "https://"+addr+"/in"), message())
	wantClass(t, res, courier.ClassConnectTimeout)
	wantError(t, res, "TLS handshake with "+addr+" not done within 300ms")
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Fatalf("gave up after %v, before the connect timeout", el)
	}
}

// A handshake that the attempt's deadline cuts short says the time it had,
// not the connect timeout of the pool.
func TestHandshakeCutShortNamesTheLimitApplied(t *testing.T) {
	t.Parallel()
	addr := rawServer(t, func(c net.Conn) { io.Copy(io.Discard, c) }) // accepts, never answers
	tr := newTransport(t, httptransport.Options{})                    // a connect timeout of 5s: the endpoint's timeout
	const left = 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), left)
	defer cancel()
	res := tr.Send(ctx, courier.Delivery{Message: message(), Endpoint: endpoint("tls-short", "https://"+addr+"/in"), Attempt: 1})
	wantClass(t, res, courier.ClassConnectTimeout)
	prefix := "TLS handshake with " + addr + " not done within "
	rest, ok := strings.CutPrefix(res.Error, prefix)
	d, err := time.ParseDuration(rest)
	if !ok || err != nil || d <= 0 || d > left {
		t.Fatalf("error = %q, want %q and a duration of at most %v", res.Error, prefix, left)
	}
}

// newTLSServer starts an HTTPS receiver with httptest's self-signed
// certificate, valid for 127.0.0.1 and example.com only.
func newTLSServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusAccepted)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are the point
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func TestTLS(t *testing.T) {
	t.Parallel()
	srv := newTLSServer(t)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())

	t.Run("unknown authority", func(t *testing.T) {
		tr := newTransport(t, httptransport.Options{})
		res := send(t, tr, endpoint("tls", srv.URL+"/in"), message())
		wantClass(t, res, courier.ClassTLS)
		wantError(t, res, "unknown authority")
	})
	t.Run("trusted", func(t *testing.T) {
		roots := x509.NewCertPool()
		roots.AddCert(srv.Certificate())
		tr := newTransport(t, httptransport.Options{TLSConfig: &tls.Config{RootCAs: roots}})
		res := send(t, tr, endpoint("tls", srv.URL+"/in"), message())
		if !res.Delivered() || res.Status != 202 {
			t.Fatalf("result = %+v, want delivered", res)
		}
	})
	t.Run("wrong host name", func(t *testing.T) {
		roots := x509.NewCertPool()
		roots.AddCert(srv.Certificate())
		tr := newTransport(t, httptransport.Options{TLSConfig: &tls.Config{RootCAs: roots}})
		res := send(t, tr, endpoint("tls", "https://localhost:"+port+"/in"), message())
		wantClass(t, res, courier.ClassTLS)
		wantError(t, res, "not valid for localhost")
	})
	t.Run("plain http behind an https url", func(t *testing.T) {
		s := mustSink(t)
		tr := newTransport(t, httptransport.Options{})
		res := send(t, tr, endpoint("tls", "https://"+s.Addr()+"/in"), message())
		wantClass(t, res, courier.ClassTLS)
		wantError(t, res, "does not speak TLS")
	})
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	s := mustSink(t)
	s.Script("/slow", sink.Delay(time.Minute, 200))
	s.Script("/stall", sink.Stall(200).WithBody("{\"partial"))
	tr := newTransport(t, httptransport.Options{})

	t.Run("no answer", func(t *testing.T) {
		t.Parallel()
		e := endpoint("slow", s.URL()+"/slow")
		e.Timeout = 300 * time.Millisecond
		start := time.Now()
		res := send(t, tr, e, message())
		wantClass(t, res, courier.ClassTimeout)
		if want := "no response within 300ms"; res.Error != want {
			t.Fatalf("error = %q, want %q", res.Error, want)
		}
		if el := time.Since(start); el < e.Timeout {
			t.Fatalf("gave up after %v, before the timeout", el)
		}
	})
	t.Run("body stalls", func(t *testing.T) {
		t.Parallel()
		e := endpoint("stall", s.URL()+"/stall")
		e.Timeout = 300 * time.Millisecond
		res := send(t, tr, e, message())
		wantClass(t, res, courier.ClassTimeout)
		wantError(t, res, "response not complete within 300ms")
		if res.Status != 200 || res.Response != `{"partial` {
			t.Fatalf("result = %+v, want the status and the part that came", res)
		}
	})
}

func TestConnectionClosed(t *testing.T) {
	t.Parallel()
	t.Run("reset", func(t *testing.T) {
		t.Parallel()
		s := mustSink(t)
		s.Script("/rst", sink.Reset())
		tr := newTransport(t, httptransport.Options{})
		res := send(t, tr, endpoint("rst", s.URL()+"/rst"), message())
		wantClass(t, res, courier.ClassConnectionClosed)
		wantError(t, res, "connection reset")
	})
	t.Run("closed without an answer", func(t *testing.T) {
		t.Parallel()
		addr := rawServer(t, func(c net.Conn) { readRequest(bufio.NewReader(c)) })
		tr := newTransport(t, httptransport.Options{})
		res := send(t, tr, endpoint("eof", "http://"+addr+"/in"), message())
		wantClass(t, res, courier.ClassConnectionClosed)
		wantError(t, res, "closed before the response was complete (EOF)")
	})
	t.Run("closed mid-body", func(t *testing.T) {
		t.Parallel()
		addr := rawServer(t, func(c net.Conn) {
			readRequest(bufio.NewReader(c))
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this")
		})
		tr := newTransport(t, httptransport.Options{})
		res := send(t, tr, endpoint("short", "http://"+addr+"/in"), message())
		wantClass(t, res, courier.ClassConnectionClosed)
		if res.Status != 200 || res.Response != "only this" {
			t.Fatalf("result = %+v", res)
		}
	})
}

func TestProtocol(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, answer, err string
	}{
		{"garbage", "SSH-2.0-OpenSSH_9.6\r\n\r\n", `first line of response "SSH-2.0-OpenSSH_9.6`},
		{"bad status", "HTTP/1.1 2OO OK\r\n\r\n", `invalid response status code "2OO"`},
		{"bad header", "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", `missing colon: "no colon here"`},
		{"bad chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "chunked body"},
		{"head too long", "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("x", 20<<10) + "\r\n\r\n", "response head from 127.0.0.1"},
		{"status 101", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n", "unexpected HTTP status 101"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := rawServer(t, func(c net.Conn) {
				readRequest(bufio.NewReader(c))
				io.WriteString(c, tc.answer)
			})
			tr := newTransport(t, httptransport.Options{})
			res := send(t, tr, endpoint("proto", "http://"+addr+"/in"), message())
			wantClass(t, res, courier.ClassProtocol)
			wantError(t, res, tc.err)
		})
	}
}

func TestRedirectIsNotFollowedByDefault(t *testing.T) {
	t.Parallel()
	s := mustSink(t)
	s.Script("/from", sink.Respond(302).WithHeader("Location", "/elsewhere").WithBody("moved"))
	tr := newTransport(t, httptransport.Options{})
	res := send(t, tr, endpoint("redir", s.URL()+"/from"), message())
	wantClass(t, res, courier.ClassProtocol)
	if want := "redirect to /elsewhere not followed"; res.Error != want {
		t.Fatalf("error = %q, want %q", res.Error, want)
	}
	if res.Status != 302 || res.Response != "moved" {
		t.Fatalf("result = %+v", res)
	}
	// A token in the Location's query stays out of the attempt's error.
	s.Script("/token", sink.Respond(302).WithHeader("Location", "https://u:pw@other.example/x?token=t0ken"))
	res = send(t, tr, endpoint("redir-token", s.URL()+"/token"), message())
	if want := "redirect to https://u:xxxxx@other.example/x?token=REDACTED not followed"; res.Error != want {
		t.Fatalf("error = %q, want %q", res.Error, want)
	}
	if got := s.Count("/elsewhere"); got != 0 {
		t.Fatalf("the redirect was followed (%d requests)", got)
	}
}

func TestFollowRedirects(t *testing.T) {
	t.Parallel()
	s := mustSink(t)
	tr := newTransport(t, httptransport.Options{})
	follow := func(name, path string) courier.Result {
		e := endpoint(name, s.URL()+path)
		e.HTTP.FollowRedirects = true
		e.HTTP.Secrets = []string{"k"}
		return send(t, tr, e, message())
	}

	for _, code := range []int{301, 302, 307, 308} {
		from, to := fmt.Sprintf("/from%d", code), fmt.Sprintf("/to%d", code)
		s.Script(from, sink.Respond(code).WithHeader("Location", to))
		res := follow("follow", from)
		if !res.Delivered() || res.Status != 204 {
			t.Fatalf("%d: result = %+v", code, res)
		}
		arr := s.Arrivals(to)
		if len(arr) != 1 {
			t.Fatalf("%d: %d arrivals at the target", code, len(arr))
		}
		// The payload and its signature survive the redirect.
		a := arr[0]
		if a.Method != "POST" || string(a.Body) != `{"total":42}` {
			t.Errorf("%d: target got %s %q", code, a.Method, a.Body)
		}
		if err := verifyStandardWebhook("k", a.Header, a.Body, now, time.Minute); err != nil {
			t.Errorf("%d: %v", code, err)
		}
	}

	s.Script("/see-other", sink.Respond(303).WithHeader("Location", "/result"))
	if res := follow("follow", "/see-other"); !res.Delivered() {
		t.Fatalf("303: result = %+v", res)
	}
	if a := s.Arrivals("/result"); len(a) != 1 || a[0].Method != "GET" || len(a[0].Body) != 0 {
		t.Fatalf("303 target got %+v, want a GET without body", a)
	}

	s.Script("/loop", sink.Respond(302).WithHeader("Location", "/loop"), sink.Repeat)
	res := follow("follow", "/loop")
	wantClass(t, res, courier.ClassProtocol)
	wantError(t, res, "stopped after 10 redirects")
	if got := s.Count("/loop"); got != 11 {
		t.Fatalf("/loop got %d requests, want 11", got)
	}
}

// A redirect hop that starts when the attempt's time is up gets no
// connection. The first answer's body stops short, so draining it runs into
// the deadline before the hop: no sleeps, and no bound on the time taken.
func TestRedirectHopAfterTheDeadlineIsAConnectTimeout(t *testing.T) {
	t.Parallel()
	addr := rawServer(t, func(c net.Conn) {
		readRequest(bufio.NewReader(c))
		io.WriteString(c, "HTTP/1.1 302 Found\r\nLocation: /next\r\nContent-Length: 10\r\n\r\nx")
		io.Copy(io.Discard, c) // until the client gives up on the body
	})
	tr := newTransport(t, httptransport.Options{})
	e := endpoint("late-hop", "http://"+addr+"/in")
	e.Timeout = 200 * time.Millisecond
	e.HTTP.FollowRedirects = true
	res := send(t, tr, e, message())
	wantClass(t, res, courier.ClassConnectTimeout)
	if want := "no connection to " + addr + " within 200ms"; res.Error != want {
		t.Fatalf("error = %q, want %q", res.Error, want)
	}
}

// Credentials follow a redirect within the origin but not to another host.
func TestRedirectToAnotherHostDropsCredentials(t *testing.T) {
	t.Parallel()
	from, to := mustSink(t), mustSink(t)
	from.Script("/same", sink.Respond(307).WithHeader("Location", "/here"))
	from.Script("/away", sink.Respond(307).WithHeader("Location", to.URL()+"/there"))
	tr := newTransport(t, httptransport.Options{})
	m := message()
	m.Headers = map[string]string{"authorization": "Bearer t0ken", "Cookie": "s=1", "Proxy-Authorization": "Basic x", "X-Tenant": "acme"}
	for _, tc := range []struct {
		path, arrival string
		s             *sink.Sink
		credentials   bool
	}{
		{"/same", "/here", from, true},
		{"/away", "/there", to, false},
	} {
		e := endpoint("redir-creds", from.URL()+tc.path)
		e.HTTP.FollowRedirects = true
		if res := send(t, tr, e, m); !res.Delivered() {
			t.Fatalf("%s: result = %+v", tc.path, res)
		}
		a := onlyArrival(t, tc.s, tc.arrival)
		for _, k := range []string{"Authorization", "Cookie", "Proxy-Authorization"} {
			if got := len(a.Header.Values(k)) == 1; got != tc.credentials {
				t.Errorf("%s: %s = %q, want it sent: %v", tc.path, k, a.Header.Values(k), tc.credentials)
			}
		}
		if got := a.Header.Get("X-Tenant"); got != "acme" {
			t.Errorf("%s: X-Tenant = %q, want acme", tc.path, got)
		}
	}
}

func TestConnectionReuse(t *testing.T) {
	t.Parallel()
	s := mustSink(t)
	s.Script("/in", sink.Respond(200).WithBody("ok"), sink.Respond(503), sink.Respond(400).WithBody("no"), sink.Cycle)
	tr := newTransport(t, httptransport.Options{})
	e := endpoint("reuse", s.URL()+"/in")
	const n = 60
	for i := range n {
		res := send(t, tr, e, message())
		if res.Status == 0 {
			t.Fatalf("send %d: %+v", i, res)
		}
	}
	if got := s.Conns(); got != 1 {
		t.Fatalf("%d sequential sends used %d connections, want 1", n, got)
	}

	// Concurrent senders share the pool: far fewer connections than sends.
	const workers, each = 4, 30
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				send(t, tr, e, message())
			}
		})
	}
	wg.Wait()
	if got := s.Count("/in"); got != n+workers*each {
		t.Fatalf("sink saw %d requests, want %d", got, n+workers*each)
	}
	if got := s.Conns(); got > 2*workers {
		t.Fatalf("%d concurrent sends used %d connections, want at most %d", workers*each, got, 2*workers)
	}
}

func TestChangedEndpointGetsAFreshPool(t *testing.T) {
	t.Parallel()
	s := mustSink(t)
	tr := newTransport(t, httptransport.Options{})
	e := endpoint("reload", s.URL()+"/in")
	send(t, tr, e, message())
	send(t, tr, e, message())
	if got := s.Conns(); got != 1 {
		t.Fatalf("Conns = %d, want 1", got)
	}
	changed := *e
	changed.Timeout = 2 * time.Second // a shorter connect timeout: a new pool
	send(t, tr, &changed, message())
	send(t, tr, &changed, message())
	if got := s.Conns(); got != 2 {
		t.Fatalf("Conns after the change = %d, want 2", got)
	}
}

func TestStaleKeptAliveConnectionIsRetried(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	conns, requests := 0, 0
	addr := rawServer(t, func(c net.Conn) {
		mu.Lock()
		conns++
		first := conns == 1
		mu.Unlock()
		br := bufio.NewReader(c)
		for i := 0; ; i++ {
			if _, _, err := readRequest(br); err != nil {
				return
			}
			mu.Lock()
			requests++
			mu.Unlock()
			if first && i == 1 {
				return // the keep-alive race: closed as the request arrived
			}
			io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
		}
	})
	tr := newTransport(t, httptransport.Options{})
	e := endpoint("stale", "http://"+addr+"/in")
	for i := range 2 {
		if res := send(t, tr, e, message()); !res.Delivered() {
			t.Fatalf("send %d: %+v", i, res)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if conns != 2 || requests != 3 {
		t.Fatalf("server saw %d connections and %d requests, want 2 and 3", conns, requests)
	}
}

// A connection that answered 101 belongs to another protocol from then on:
// the next attempt goes out on a new one, as with net/http's client.
func TestConnectionThatAnswered101IsNotReused(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	conns, requests, onFirst := 0, 0, 0
	addr := rawServer(t, func(c net.Conn) {
		mu.Lock()
		conns++
		first := conns == 1
		mu.Unlock()
		br := bufio.NewReader(c)
		for {
			if _, _, err := readRequest(br); err != nil {
				return
			}
			mu.Lock()
			requests++
			n := requests
			if first {
				onFirst++
			}
			mu.Unlock()
			if n == 1 {
				io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n")
				continue
			}
			io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
		}
	})
	tr := newTransport(t, httptransport.Options{})
	e := endpoint("upgrade", "http://"+addr+"/in")
	res := send(t, tr, e, message())
	wantClass(t, res, courier.ClassProtocol)
	wantError(t, res, "unexpected HTTP status 101")
	if res := send(t, tr, e, message()); !res.Delivered() {
		t.Fatalf("the send after the 101: %+v", res)
	}
	mu.Lock()
	defer mu.Unlock()
	if conns != 2 || requests != 2 || onFirst != 1 {
		t.Fatalf("server saw %d connections and %d requests, %d on the first; want 2, 2 and 1", conns, requests, onFirst)
	}
}

// An attempt whose context is already canceled sends nothing. One under
// way runs to its outcome or its timeout (the engine never cancels one, so
// that what the receiver did is known).
func TestCanceledContextSendsNothing(t *testing.T) {
	t.Parallel()
	s := mustSink(t)
	tr := newTransport(t, httptransport.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := tr.Send(ctx, courier.Delivery{Message: message(), Endpoint: endpoint("cancel", s.URL()+"/in"), Attempt: 1})
	wantClass(t, res, courier.ClassTransport)
	wantError(t, res, "canceled")
	if n := s.Total(); n != 0 {
		t.Fatalf("the receiver got %d requests", n)
	}
}

func TestUnsendableMessagesAndEndpoints(t *testing.T) {
	t.Parallel()
	s := mustSink(t)
	tr := newTransport(t, httptransport.Options{})

	m := message()
	m.Headers = map[string]string{"X-Injected": "a\r\nX-Evil: 1"}
	res := send(t, tr, endpoint("bad", s.URL()+"/in"), m)
	wantClass(t, res, courier.ClassRejected)

	m = message()
	m.Headers = map[string]string{"Bad Name": "v"}
	wantClass(t, send(t, tr, endpoint("bad", s.URL()+"/in"), m), courier.ClassRejected)

	e := endpoint("bad", s.URL()+"/in")
	e.HTTP.Secrets = []string{"whsec_not base64!"}
	res = send(t, tr, e, message())
	wantClass(t, res, courier.ClassTransport)
	wantError(t, res, "secret 1")

	wantClass(t, send(t, tr, endpoint("bad", "ftp://example.org/x"), message()), courier.ClassTransport)
	if got := s.Total(); got != 0 {
		t.Fatalf("the sink got %d requests for unsendable deliveries", got)
	}
}
