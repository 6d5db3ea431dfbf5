package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

// inflightMessages lists every message the store has in flight, page by
// page: after a kill, the messages that may be delivered twice.
func inflightMessages(t *testing.T, s courier.Store) []*courier.Message {
	t.Helper()
	var out []*courier.Message
	f := courier.MessageFilter{State: courier.StateInflight, Limit: courier.MaxListLimit}
	for {
		page, err := s.Messages(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page.Messages...)
		if page.Next == "" {
			return out
		}
		f.Cursor = page.Next
	}
}

// courierBin is the binary built once for the process tests.
var courierBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "courier-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	courierBin = filepath.Join(dir, "courier")
	build := exec.Command("go", "build", "-o", courierBin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build courier:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// process is a running `courier serve`.
type process struct {
	cmd    *exec.Cmd
	url    string
	output *bytes.Buffer
	mu     sync.Mutex // guards output, which the process writes while tests read
	exited chan error
}

// log returns what the process printed so far.
func (p *process) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.output.String()
}

const processConfig = `
listen: %s
store: {driver: sqlite, path: %s}
outbound: {allow_networks: [127.0.0.0/8]}
endpoints:
  acme: {transport: http, url: "http://127.0.0.1:9/inbox"}
routes:
  acme: {endpoints: [acme]}
`

// startServer runs the binary on dir's store and waits until it answers.
func startServer(t *testing.T, dir, addr string) *process {
	t.Helper()
	cfg := filepath.Join(dir, "courier.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(processConfig, addr, filepath.Join(dir, "data", "courier.db"))), 0o600); err != nil {
		t.Fatal(err)
	}
	return startServerWith(t, cfg)
}

// startServerWith runs the binary with a configuration file and waits until
// it listens.
func startServerWith(t *testing.T, cfg string) *process {
	t.Helper()
	p := &process{output: &bytes.Buffer{}, exited: make(chan error, 1)}
	p.cmd = exec.Command(courierBin, "serve", "--config", cfg)
	pr, pw := io.Pipe()
	p.cmd.Stdout = pw
	p.cmd.Stderr = pw
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait(); pw.Close() }()
	listening := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`listening on (https?://\S+)`)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			p.mu.Lock()
			p.output.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				listening <- m[1]
			}
		}
	}()
	select {
	case p.url = <-listening:
	case err := <-p.exited:
		t.Fatalf("courier serve exited at start: %v\n%s", err, p.log())
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		t.Fatalf("courier serve did not start\n%s", p.log())
	}
	t.Cleanup(func() { p.cmd.Process.Kill() })
	return p
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestKillLosesNothing is the durability promise: every id that got 201 or
// 200 is there after a SIGKILL, with its exact payload.
func TestKillLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("process test; runs without -short")
	}
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
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 3000 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.exited
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
	if testing.Short() {
		t.Skip("process test; runs without -short")
	}
	dir := t.TempDir()
	addr := freeAddr(t)
	p := startServer(t, dir, addr)
	resp, err := http.Post(p.url+"/v1/messages", "application/json",
		strings.NewReader(`{"id":"kept","type":"invoice","route":"acme","payload":{"a":1}}`))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("ingest: %v %v", resp, err)
	}
	resp.Body.Close()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, p.log())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no exit 30 s after SIGTERM")
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
	if testing.Short() {
		t.Skip("process test; runs without -short")
	}
	dir := t.TempDir()
	addr := freeAddr(t)
	p := startServer(t, dir, addr)
	cfg := filepath.Join(dir, "courier.yaml")
	put := func(id, route string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPut, p.url+"/v1/messages/"+id, strings.NewReader(`{"type":"t","route":"`+route+`","payload":1}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := put("before", "globex"); got != http.StatusUnprocessableEntity {
		t.Fatalf("a route not yet configured: %d, want 422", got)
	}
	body, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	added := strings.Replace(string(body), "routes:\n", "routes:\n  globex: {endpoints: [acme]}\n", 1)
	if err := os.WriteFile(cfg, []byte(added), 0o600); err != nil {
		t.Fatal(err)
	}
	p.cmd.Process.Signal(syscall.SIGHUP)
	deadline := time.Now().Add(10 * time.Second)
	for put("after", "globex") != http.StatusCreated {
		if time.Now().After(deadline) {
			t.Fatalf("the route added to the file was not taken in after SIGHUP\n%s", p.log())
		}
		time.Sleep(50 * time.Millisecond)
	}

	if err := os.WriteFile(cfg, []byte(added+"nonsense: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p.cmd.Process.Signal(syscall.SIGHUP)
	time.Sleep(300 * time.Millisecond)
	if got := put("still", "globex"); got != http.StatusCreated {
		t.Fatalf("after a SIGHUP with a broken file: %d, want the running configuration kept (201)", got)
	}
	select {
	case err := <-p.exited:
		t.Fatalf("the server exited on a broken reload: %v", err)
	default:
	}
}
