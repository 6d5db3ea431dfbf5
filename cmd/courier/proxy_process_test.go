package main

import (
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/courier-gw/courier/internal/testkit/sink"
	"github.com/courier-gw/courier/internal/testkit/tinyproxy"
)

// outbound.proxy sends every http endpoint's requests through a real
// forward proxy: the receiver sees the proxy's address; a reload without it
// sends them straight again. The proxy's password is not in the log,
// which tells of the connection pools at debug level.
func TestOutboundProxyProcess(t *testing.T) {
	skipIfShort(t)
	proxy := tinyproxy.Start(t, "courier", "pr0xy-pass")
	sk := sink.MustStart(t, sink.Options{})
	dir := t.TempDir()
	cfg := filepath.Join(dir, "courier.yaml")
	listen := freeAddr(t)
	config := func(outbound string) string {
		return "listen: " + listen + "\nstore: {driver: sqlite, path: " + storePath(dir) + "}\nlog: {level: debug}\n" +
			"outbound: {allow_networks: [127.0.0.0/8]" + outbound + "}\n" +
			"endpoints:\n  hook: {transport: http, url: \"" + sk.URL() + "/hook\"}\nroutes:\n  r: {endpoints: [hook]}\n"
	}
	writeFile(t, cfg, config(`, proxy: "`+proxy.URL("courier", "pr0xy-pass")+`"`))
	p := startServerWith(t, cfg)

	from := func(id string) string {
		t.Helper()
		p.create(t, id, `{"type": "invoice", "route": "r", "payload": {"n": 1}}`)
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			for _, a := range sk.All() {
				if a.Header.Get("webhook-id") == id {
					host, _, _ := net.SplitHostPort(a.RemoteAddr)
					return host
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%s did not arrive\n%s", id, p.log())
		return ""
	}
	if host := from("via-proxy"); host != tinyproxy.Out {
		t.Fatalf("with outbound.proxy the request came from %s, want the proxy's %s", host, tinyproxy.Out)
	}
	writeFile(t, cfg, config(""))
	resp, err := http.Post(p.url+"/v1/reload", "application/json", nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("reload: %v %v", resp, err)
	}
	resp.Body.Close()
	if host := from("straight"); host != "127.0.0.1" {
		t.Fatalf("without outbound.proxy the request came from %s, want 127.0.0.1", host)
	}
	if strings.Contains(p.log(), "pr0xy-pass") {
		t.Fatalf("the log shows the proxy's password:\n%s", p.log())
	}
}
