package http_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/clocktest"
	"github.com/courier-gw/courier/internal/testkit/sink"
	httptransport "github.com/courier-gw/courier/transport/http"
)

// now is the fixed time of every attempt in these tests: webhook-timestamp
// and the reference point of Retry-After dates.
var now = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func newTransport(t *testing.T, o httptransport.Options) *httptransport.Transport {
	t.Helper()
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clocktest.New(now)
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

// sinkAndTransport gives a test a receiver and a transport with the
// options of these tests.
func sinkAndTransport(t *testing.T) (*sink.Sink, *httptransport.Transport) {
	t.Helper()
	return sink.MustStart(t, sink.Options{}), newTransport(t, httptransport.Options{})
}

func endpoint(name, url string) *courier.Endpoint {
	return &courier.Endpoint{
		Name: name, Transport: courier.TransportHTTP, Timeout: 5 * time.Second,
		Settings: &httptransport.Settings{URL: url},
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

func TestDelivered2xxKeepsStatusAndExcerpt(t *testing.T) {
	t.Parallel()
	s, tr := sinkAndTransport(t)
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
	s, tr := sinkAndTransport(t)
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
	s, tr := sinkAndTransport(t)
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
	s, tr := sinkAndTransport(t)
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

func TestTimeout(t *testing.T) {
	t.Parallel()
	s := sink.MustStart(t, sink.Options{})
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
		// Time enough for the status line and the first bytes to come on
		// a busy machine: the timeout must end the body, not the wait
		// for the response.
		e.Timeout = 5 * time.Second
		res := send(t, tr, e, message())
		wantClass(t, res, courier.ClassTimeout)
		wantError(t, res, "response not complete within 5s")
		if res.Status != 200 || res.Response != `{"partial` {
			t.Fatalf("result = %+v, want the status and the part that came", res)
		}
	})
}

func TestConnectionClosed(t *testing.T) {
	t.Parallel()
	t.Run("reset", func(t *testing.T) {
		t.Parallel()
		s := sink.MustStart(t, sink.Options{})
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
	s := sink.MustStart(t, sink.Options{})
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
	s, tr := sinkAndTransport(t)
	follow := func(name, path string) courier.Result {
		e := endpoint(name, s.URL()+path)
		httptransport.Of(e).FollowRedirects = true
		httptransport.Of(e).Secrets = []string{"k"}
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
	httptransport.Of(e).FollowRedirects = true
	res := send(t, tr, e, message())
	wantClass(t, res, courier.ClassConnectTimeout)
	if want := "no connection to " + addr + " within 200ms"; res.Error != want {
		t.Fatalf("error = %q, want %q", res.Error, want)
	}
}

// Credentials follow a redirect within the origin but not to another host.
func TestRedirectToAnotherHostDropsCredentials(t *testing.T) {
	t.Parallel()
	from, to := sink.MustStart(t, sink.Options{}), sink.MustStart(t, sink.Options{})
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
		httptransport.Of(e).FollowRedirects = true
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

// An attempt whose context is already canceled sends nothing. One under
// way runs to its outcome or its timeout (the engine never cancels one, so
// that what the receiver did is known).
func TestCanceledContextSendsNothing(t *testing.T) {
	t.Parallel()
	s, tr := sinkAndTransport(t)
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
	s, tr := sinkAndTransport(t)

	m := message()
	m.Headers = map[string]string{"X-Injected": "a\r\nX-Evil: 1"}
	res := send(t, tr, endpoint("bad", s.URL()+"/in"), m)
	wantClass(t, res, courier.ClassRejected)

	m = message()
	m.Headers = map[string]string{"Bad Name": "v"}
	wantClass(t, send(t, tr, endpoint("bad", s.URL()+"/in"), m), courier.ClassRejected)

	e := endpoint("bad", s.URL()+"/in")
	httptransport.Of(e).Secrets = []string{"whsec_not base64!"}
	res = send(t, tr, e, message())
	wantClass(t, res, courier.ClassTransport)
	wantError(t, res, "secret 1")

	wantClass(t, send(t, tr, endpoint("bad", "ftp://example.org/x"), message()), courier.ClassTransport)
	if got := s.Total(); got != 0 {
		t.Fatalf("the sink got %d requests for unsendable deliveries", got)
	}
}
