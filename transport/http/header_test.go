package http_test

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/clocktest"
	"github.com/courier-gw/courier/internal/testkit/sink"
	httptransport "github.com/courier-gw/courier/transport/http"
)

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

func TestRequestCarriesTheHeadersOfDesign8(t *testing.T) {
	t.Parallel()
	s, tr := sinkAndTransport(t)
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
	httptransport.Of(e).Method = "put"
	httptransport.Of(e).Secrets = []string{"s3cret"}
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
	httptransport.Of(e).Secrets = []string{"s3cret"}
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
	s, tr := sinkAndTransport(t)
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
	s, tr := sinkAndTransport(t)
	whsec := "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	raw := "a plain shared secret"
	e := endpoint("signed", s.URL()+"/signed")
	httptransport.Of(e).Secrets = []string{whsec, raw} // rotation: old and new
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
	s := sink.MustStart(t, sink.Options{})
	tr := newTransport(t, httptransport.Options{Clock: clocktest.New(time.Unix(1614265330, 0))})
	e := endpoint("vector", s.URL()+"/vector")
	httptransport.Of(e).Secrets = []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}
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

// A message with a number in its key's order carries it and its previous
// message's id; the first of a key has no previous, and a message without
// a number carries neither header.
func TestRequestCarriesTheSequence(t *testing.T) {
	t.Parallel()
	s, tr := sinkAndTransport(t)
	e := endpoint("sequence", s.URL()+"/seq")
	for _, tc := range []struct {
		seq        int64
		prev       string
		wantSeq    []string
		wantPrevID []string
	}{
		{0, "", nil, nil},
		{1, "", []string{"1"}, nil},
		{42, "msg-41", []string{"42"}, []string{"msg-41"}},
	} {
		m := message()
		m.OrderingKey, m.Sequence, m.PreviousID = "cust-1", tc.seq, tc.prev
		m.Headers = map[string]string{"Courier-Sequence": "forged", "Courier-Previous-Id": "forged"}
		if res := tr.Send(context.Background(), courier.Delivery{Message: m, Endpoint: e, Attempt: 1}); !res.Delivered() {
			t.Fatalf("result = %+v", res)
		}
		arr := s.Arrivals("/seq")
		a := arr[len(arr)-1]
		if got := a.Header.Values("Courier-Sequence"); !slices.Equal(got, tc.wantSeq) {
			t.Errorf("sequence %d: Courier-Sequence = %q, want %q", tc.seq, got, tc.wantSeq)
		}
		if got := a.Header.Values("Courier-Previous-Id"); !slices.Equal(got, tc.wantPrevID) {
			t.Errorf("sequence %d: Courier-Previous-Id = %q, want %q", tc.seq, got, tc.wantPrevID)
		}
	}
}
