package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// acmeConfig routes acme to an endpoint where nothing listens: its
// messages stay in the store, for the tests of what the store keeps.
const acmeConfig = `endpoints:
  acme: {transport: http, url: "http://127.0.0.1:9/inbox"}
routes:
  acme: {endpoints: [acme]}
`

// startServer runs the binary on dir's store, listening on addr, with the
// route of acmeConfig.
func startServer(t *testing.T, dir, addr string) *process {
	t.Helper()
	return startServerWith(t, writeConfig(t, dir, addr, acmeConfig))
}

// TestKillLosesNothing is the durability promise: every id that got 201 or
// 200 is there after a SIGKILL, with its exact payload.
func TestKillLosesNothing(t *testing.T) {
	skipIfShort(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	p := startServer(t, dir, addr)

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 10 * time.Second}
	var mu sync.Mutex
	acked := map[string][]byte{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := 0; c < 32; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("k-%d-%d", c, i)
				payload := fmt.Sprintf(`{"client":%d,"n":%d,"pad":"%s"}`, c, i, strings.Repeat("p", rng.IntN(2000)))
				body := fmt.Sprintf(`{"type":"invoice","route":"acme","payload":%s}`, payload)
				req, _ := http.NewRequest(http.MethodPut, p.url+"/v1/messages/"+id, strings.NewReader(body))
				resp, err := client.Do(req)
				if err != nil {
					continue // the server died under this request: no promise was made
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusOK {
					mu.Lock()
					acked[id] = []byte(payload)
					mu.Unlock()
				}
			}
		}(c)
	}
	// Let traffic build up, then kill the server in the middle of it.
	for deadline := time.Now().Add(3 * time.Minute); ; {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 3000 {
			break
		}
		if time.Now().After(deadline) {
			close(stop)
			wg.Wait()
			t.Fatalf("%d ingests acknowledged within 3 minutes, want 3000 before the kill\n%s", n, p.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.kill(t)
	close(stop)
	wg.Wait()
	t.Logf("%d messages acknowledged before SIGKILL", len(acked))

	p2 := startServer(t, dir, addr)
	missing, wrong := 0, 0
	for id, want := range acked {
		resp, err := client.Get(p2.url + "/v1/messages/" + id)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Payload json.RawMessage `json:"payload"`
		}
		json.NewDecoder(resp.Body).Decode(&m)
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusNotFound:
			missing++
		case !bytes.Equal(m.Payload, want):
			wrong++
		}
	}
	if missing > 0 || wrong > 0 {
		t.Fatalf("after SIGKILL: %d of %d acknowledged messages missing, %d with another payload", missing, len(acked), wrong)
	}
}

// TestGracefulShutdown: SIGTERM lets the server finish and exit 0, and a
// restart finds the data.
func TestGracefulShutdown(t *testing.T) {
	skipIfShort(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	p := startServer(t, dir, addr)
	resp, err := http.Post(p.url+"/v1/messages", "application/json",
		strings.NewReader(`{"id":"kept","type":"invoice","route":"acme","payload":{"a":1}}`))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("ingest: %v %v", resp, err)
	}
	resp.Body.Close()
	if err := p.terminate(t, 30*time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.log())
	}
	p2 := startServer(t, dir, addr)
	resp, err = http.Get(p2.url + "/v1/messages/kept")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("after restart: %v %v", resp, err)
	}
	resp.Body.Close()
}

// TestReloadOnSIGHUP: a new route is taken in by SIGHUP; a file with errors
// is refused and the running configuration stays.
func TestReloadOnSIGHUP(t *testing.T) {
	skipIfShort(t)
	p := startServer(t, t.TempDir(), freeAddr(t))
	put := func(id, route string) int {
		t.Helper()
		return p.put(t, id, `{"type":"t","route":"`+route+`","payload":1}`)
	}
	if got := put("before", "globex"); got != http.StatusUnprocessableEntity {
		t.Fatalf("a route not yet configured: %d, want 422", got)
	}
	body, err := os.ReadFile(p.config)
	if err != nil {
		t.Fatal(err)
	}
	added := strings.Replace(string(body), "routes:\n", "routes:\n  globex: {endpoints: [acme]}\n", 1)
	writeFile(t, p.config, added)
	p.cmd.Process.Signal(syscall.SIGHUP)
	waitUntil(t, p, 30*time.Second, "the route added to the file taken in after SIGHUP", func() bool {
		return put("after", "globex") == http.StatusCreated
	})

	writeFile(t, p.config, added+"nonsense: [\n")
	p.cmd.Process.Signal(syscall.SIGHUP)
	waitUntil(t, p, 30*time.Second, "the broken file refused after SIGHUP", func() bool {
		return strings.Contains(p.log(), "reload failed")
	})
	if got := put("still", "globex"); got != http.StatusCreated {
		t.Fatalf("after a SIGHUP with a broken file: %d, want the running configuration kept (201)", got)
	}
	select {
	case err := <-p.exited:
		t.Fatalf("the server exited on a broken reload: %v", err)
	default:
	}
}
