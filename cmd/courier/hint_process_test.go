package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/internal/testkit/sink"
)

// The hint a server without routes prints works as printed on a server of
// the defaults, whose SSRF guard keeps endpoints off loopback: its
// endpoint, at the receiver's own port on this machine, gets the message.
// An endpoint the guard refuses is taken with a warning, through the API,
// courier apply and courier config check alike.
func TestStartHintWorksAndGuardedEndpointsWarn(t *testing.T) {
	skipIfShort(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "courier.yaml")
	// No outbound allowlist: the guard as a server without a file has it.
	writeFile(t, cfg, fmt.Sprintf("listen: %s\nstore: {driver: sqlite, path: %s}\n", freeAddr(t), storePath(dir)))
	p := startServerWith(t, cfg)
	sk := sink.MustStart(t, sink.Options{})

	// The banner is printed before the server listens for good; read the
	// hint's commands from it.
	var puts [][]string
	waitUntil(t, p, 30*time.Second, "the hint", func() bool {
		puts = regexp.MustCompile(`curl -X PUT (\S+) -d '(.*)'`).FindAllStringSubmatch(p.log(), -1)
		return len(puts) == 2
	})
	for _, put := range puts {
		// The receiver listens on a free port, not 9000: the one change.
		body := strings.Replace(put[2], "http://127.0.0.1:9000", sk.URL(), 1)
		req, _ := http.NewRequest(http.MethodPut, put[1], strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated || resp.Header.Get("Warning") != "" {
			t.Fatalf("the hint's PUT %s %s: %s, warning %q", put[1], body, resp.Status, resp.Header.Get("Warning"))
		}
	}
	binaryPrints(t, `{"hello": "world"}`, []string{"--server", p.url, "send", "--type", "greeting", "--route", "my-app", "--id", "hi"}, "created hi")
	c := api.NewClient(p.url, "")
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, err := c.Message(context.Background(), "hi")
		if err != nil {
			t.Fatal(err)
		}
		if m.State == courier.StateDelivered {
			break
		}
		if m.State == courier.StateSuspended || time.Now().After(deadline) {
			t.Fatalf("the message of the hint's endpoint is %s (%s): %s", m.State, m.Reason, m.LastError)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := len(sk.All()); n != 1 {
		t.Errorf("the receiver got %d requests, want 1", n)
	}

	// Without allow_networks, the endpoint is taken with a warning.
	req, _ := http.NewRequest(http.MethodPut, p.url+"/v1/endpoints/guarded", strings.NewReader(`{"transport": "http", "url": "http://127.0.0.1:9000/inbox"}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var obj api.TopologyObject
	decodeBody(t, resp, &obj)
	const want = "endpoints.guarded.url: 127.0.0.1:9000 is a loopback address, which endpoints may not reach: allow it with allow_networks on the endpoint or outbound.allow_networks"
	if resp.StatusCode != http.StatusCreated || len(obj.Warnings) != 1 || !strings.HasPrefix(obj.Warnings[0], want) ||
		!strings.HasPrefix(resp.Header.Get("Warning"), `299 courier "`+want) {
		t.Errorf("PUT of an endpoint the guard refuses: %s, warnings %q, Warning %q", resp.Status, obj.Warnings, resp.Header.Get("Warning"))
	}

	file := filepath.Join(dir, "topology.yaml")
	writeFile(t, file, `endpoints:
  guarded: {transport: http, url: "http://127.0.0.1:9000/inbox"}
  private: {transport: http, url: "https://10.0.0.7/in"}
  allowed: {transport: http, url: "http://127.0.0.1:9001/in", allow_networks: [127.0.0.1/32]}
routes:
  r: {endpoints: [guarded, private, allowed]}
`)
	out, errOut, status := runBinary(t, nil, "", "--server", p.url, "apply", "-f", file)
	if status != 0 || !strings.Contains(errOut, "warning: endpoints.private.url: 10.0.0.7:443 is a private address") ||
		strings.Contains(errOut, "endpoints.allowed") || strings.Contains(errOut, "endpoints.guarded") {
		// guarded is as it was: not written again, so not warned of again.
		t.Errorf("apply: exit status %d\n%s%s", status, out, errOut)
	}
	out, errOut, status = runBinary(t, nil, "", "config", "check", file)
	if status != 0 || !strings.Contains(out, "is valid") || strings.Count(errOut, "warning: ") != 2 ||
		!strings.Contains(errOut, "endpoints.guarded.url: 127.0.0.1:9000 is a loopback address") ||
		!strings.Contains(errOut, "endpoints.private.url: 10.0.0.7:443 is a private address") {
		t.Errorf("config check: exit status %d\n%s%s", status, out, errOut)
	}
}
