package http_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/cpustat"
	httptransport "github.com/courier-gw/courier/transport/http"
)

// receiverEnv makes the test binary a receiver process for
// BenchmarkSendCPU.
const receiverEnv = "COURIER_BENCH_RECEIVER"

// TestBenchReceiverProcess is the receiver of BenchmarkSendCPU when the
// benchmark starts this binary with receiverEnv set: it serves 204 over
// HTTP/1.1 and over TLS with HTTP/2 offered, prints both addresses and its
// certificate, and stops when its input closes. Without receiverEnv it
// does nothing.
func TestBenchReceiverProcess(t *testing.T) {
	if os.Getenv(receiverEnv) == "" {
		t.Skip("the receiver process of BenchmarkSendCPU")
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	})
	plain := httptest.NewServer(h)
	defer plain.Close()
	secure := httptest.NewUnstartedServer(h)
	secure.EnableHTTP2 = true
	secure.StartTLS()
	defer secure.Close()
	fmt.Printf("%s %s %s\n", plain.URL, secure.URL, base64.StdEncoding.EncodeToString(secure.Certificate().Raw))
	io.Copy(io.Discard, os.Stdin)
}

// BenchmarkSendCPU measures the CPU time this process spends per attempt
// (cpu-ns/op) for the transport (fasthttp) and for a prototype send path
// on net/http, with the receiver in another process so that its work is
// not counted: 1 KiB messages, 64 at a time, over kept-alive connections,
// in the clear (HTTP/1.1 both) and over TLS (fasthttp HTTP/1.1, net/http
// HTTP/2 as the receiver offers it).
func BenchmarkSendCPU(b *testing.B) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchReceiverProcess$")
	cmd.Env = append(os.Environ(), receiverEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(line)
	if len(f) != 3 {
		b.Fatalf("receiver said %q", line)
	}
	der, err := base64.StdEncoding.DecodeString(f[2])
	if err != nil {
		b.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		b.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	header := sentHeader(b)
	payload := bytes.Repeat([]byte("x"), 1024)

	for _, tc := range []struct {
		name, url string
	}{
		{"clear", f[0]},
		{"tls", f[1]},
	} {
		b.Run("fasthttp/"+tc.name, func(b *testing.B) {
			tr := httptransport.New(httptransport.Options{Logger: slog.New(slog.DiscardHandler), AllowNetworks: loopback,
				TLSConfig: &tls.Config{RootCAs: roots}})
			b.Cleanup(tr.Close)
			ep := courier.NewEndpoint("receiver", courier.TransportHTTP)
			ep.Timeout = 10 * time.Second
			ep.Settings = &httptransport.Settings{URL: tc.url + "/in", Method: http.MethodPost}
			runCPU(b, func() courier.Result {
				m := &courier.Message{ID: "inv-1", Type: "invoice", ContentType: "application/json", Payload: payload, TotalAttempts: 1}
				return tr.Send(context.Background(), courier.Delivery{Message: m, Endpoint: ep, Attempt: 1})
			})
		})
		for _, h2 := range []bool{false, true} {
			name := "net-http-1.1/" + tc.name
			if h2 {
				if tc.name == "clear" {
					continue // HTTP/2 is offered over TLS only
				}
				name = "net-http-2/" + tc.name
			}
			b.Run(name, func(b *testing.B) {
				ht := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: h2,
					MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second}
				if !h2 {
					ht.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
				}
				b.Cleanup(ht.CloseIdleConnections)
				c := &http.Client{Transport: ht, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
				runCPU(b, func() courier.Result { return netHTTPSend(c, tc.url+"/in", header, payload) })
				b.StopTimer()
				resp, err := c.Get(tc.url + "/in")
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
				if want := map[bool]int{false: 1, true: 2}[h2]; resp.ProtoMajor != want {
					b.Fatalf("net/http spoke HTTP/%d, want %d", resp.ProtoMajor, want)
				}
			})
		}
	}
}

// runCPU runs send 64 at a time and reports the process's CPU per attempt.
func runCPU(b *testing.B, send func() courier.Result) {
	b.Helper()
	b.SetParallelism(32) // 64 goroutines on 2 cores
	b.ReportAllocs()
	b.ResetTimer()
	start := cpustat.Process()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if res := send(); !res.Delivered() {
				b.Fatalf("not delivered: %+v", res)
			}
		}
	})
	b.ReportMetric(float64(cpustat.Process()-start)/float64(b.N), "cpu-ns/op")
}

// sentHeader is the header the transport sends with a 1 KiB message, as
// a receiver reads it: what the net/http prototype sends too.
func sentHeader(b *testing.B) http.Header {
	b.Helper()
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- r.Header.Clone():
		default:
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	tr := httptransport.New(httptransport.Options{Logger: slog.New(slog.DiscardHandler), AllowNetworks: loopback})
	defer tr.Close()
	ep := courier.NewEndpoint("receiver", courier.TransportHTTP)
	ep.Settings = &httptransport.Settings{URL: srv.URL + "/in", Method: http.MethodPost}
	m := &courier.Message{ID: "inv-1", Type: "invoice", ContentType: "application/json", Payload: []byte("{}"), TotalAttempts: 1}
	if res := tr.Send(context.Background(), courier.Delivery{Message: m, Endpoint: ep, Attempt: 1}); !res.Delivered() {
		b.Fatalf("%+v", res)
	}
	h := <-got
	for _, k := range []string{"Content-Length", "Accept-Encoding"} {
		h.Del(k)
	}
	return h
}

// netHTTPSend is the prototype attempt on net/http: the request with the
// transport's header under the attempt's deadline, the status, and up to
// 1 KiB of the answer kept.
func netHTTPSend(c *http.Client, url string, header http.Header, payload []byte) courier.Result {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(payload))
	if err != nil {
		return courier.Result{Class: courier.ClassTransport, Error: err.Error()}
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		return courier.Result{Class: courier.ClassTransport, Error: err.Error()}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode/100 != 2 {
		return courier.Result{Class: courier.ClassRejected, Status: resp.StatusCode, Error: string(body)}
	}
	return courier.Result{Status: resp.StatusCode, Body: string(body)}
}
