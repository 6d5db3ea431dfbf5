package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/internal/testkit/sink"
	"github.com/courier-gw/courier/sqlite"
)

// courierBin is the binary built once for the process tests.
var courierBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "courier-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	courierBin = filepath.Join(dir, "courier")
	// The build for tests: COURIER_CLOCK_SHIFT, when a test sets it, makes
	// a node whose clock is that far off (clock_shift.go).
	build := exec.Command("go", "build", "-tags", "courier_clockshift", "-o", courierBin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build courier:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// skipIfShort skips a test that runs the binary as a process: such tests
// take seconds to minutes each.
func skipIfShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("process test; runs without -short")
	}
}

// process is a running `courier serve`.
type process struct {
	cmd    *exec.Cmd
	config string // the configuration file, for restarts and reloads
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

// nodeConfig is the start of every test node's configuration: where it
// listens, its store, and outbound connections allowed to loopback, where
// the tests' receivers listen.
func nodeConfig(listen, store string) string {
	return fmt.Sprintf("listen: %s\nstore: %s\noutbound: {allow_networks: [127.0.0.0/8]}\n", listen, store)
}

// storePath is where a node configured by writeConfig in dir keeps its
// SQLite store.
func storePath(dir string) string {
	return filepath.Join(dir, "data", "courier.db")
}

// writeConfig writes dir/courier.yaml for a node that listens on listen and
// keeps its store in SQLite at storePath(dir), with rest after the start
// nodeConfig gives, and returns the file's path.
func writeConfig(t *testing.T, dir, listen, rest string) string {
	t.Helper()
	cfg := filepath.Join(dir, "courier.yaml")
	writeFile(t, cfg, nodeConfig(listen, fmt.Sprintf("{driver: sqlite, path: %s}", storePath(dir)))+rest)
	return cfg
}

// writeFile writes text to path, readable by its owner only, as
// configuration files with key hashes should be.
func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// startNode writes a configuration as writeConfig does, on a free address,
// and runs the binary on it.
func startNode(t *testing.T, dir, rest string) *process {
	t.Helper()
	return startServerWith(t, writeConfig(t, dir, freeAddr(t), rest))
}

// startPostgresNode writes a configuration for a node on a free address
// that keeps its store in the PostgreSQL database dsn, with rest after the
// start nodeConfig gives, and runs the binary on it.
func startPostgresNode(t *testing.T, dsn, rest string) *process {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "courier.yaml")
	writeFile(t, cfg, nodeConfig(freeAddr(t), fmt.Sprintf("{driver: postgres, dsn: %q}", dsn))+rest)
	return startServerWith(t, cfg)
}

// startServerWith runs the binary with a configuration file (and any more
// flags of serve's) and waits until it listens.
func startServerWith(t *testing.T, cfg string, flags ...string) *process {
	t.Helper()
	return startServerEnv(t, cfg, nil, flags...)
}

// startServerEnv is startServerWith with more environment variables
// (NAME=value) for the process.
func startServerEnv(t *testing.T, cfg string, env []string, flags ...string) *process {
	t.Helper()
	p := &process{config: cfg, output: &bytes.Buffer{}, exited: make(chan error, 1)}
	p.cmd = exec.Command(courierBin, append([]string{"serve", "--config", cfg}, flags...)...)
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
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

// kill ends the process with SIGKILL, as a crash would, and waits until it
// has exited.
func (p *process) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.exited
}

// terminate sends SIGTERM and returns how the process exited, failing
// unless it exits within the time given.
func (p *process) terminate(t *testing.T, within time.Duration) error {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		return err
	case <-time.After(within):
		t.Fatalf("still running %v after SIGTERM\n%s", within, p.log())
		return nil
	}
}

// put sends a message with body under id and returns the answer's status.
func (p *process) put(t *testing.T, id, body string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, p.url+"/v1/messages/"+id, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// getJSON reads the JSON answer to GET url into v, failing the test unless
// it is 200 OK.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	decodeBody(t, resp, v)
}

// decodeBody reads a JSON answer into v and closes it.
func decodeBody(t *testing.T, resp *http.Response, v any) {
	t.Helper()
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("decode the answer (%s): %v", resp.Status, err)
	}
}

// create sends a message as put does, failing unless it was created.
func (p *process) create(t *testing.T, id, body string) {
	t.Helper()
	if got := p.put(t, id, body); got != http.StatusCreated {
		t.Fatalf("ingest %s: %d, want 201\n%s", id, got, p.log())
	}
}

// ingest sends a message of type typ for each id, to the route route(i)
// names (published when it names none), in batches of 1,000, each batch to
// the next of nodes; it fails unless every batch is taken whole.
func ingest(t *testing.T, nodes []*process, typ string, ids []string, route func(i int) string) {
	t.Helper()
	client := &http.Client{Timeout: 60 * time.Second}
	for b := 0; b*1000 < len(ids); b++ {
		var items []string
		for i := b * 1000; i < min((b+1)*1000, len(ids)); i++ {
			to := ""
			if r := route(i); r != "" {
				to = fmt.Sprintf(`"route":%q,`, r)
			}
			items = append(items, fmt.Sprintf(`{"id":%q,"type":%q,%s"payload":{"n":%d}}`, ids[i], typ, to, i))
		}
		node := nodes[b%len(nodes)]
		resp, err := client.Post(node.url+"/v1/messages/batch", "application/json", strings.NewReader(`{"messages":[`+strings.Join(items, ",")+`]}`))
		if err != nil {
			t.Fatalf("batch %d: %v", b, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("batch %d: %s", b, resp.Status)
		}
	}
}

func messageIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("m-%05d", i)
	}
	return ids
}

// waitUntil polls cond, failing after within with the process's log.
func waitUntil(t *testing.T, p *process, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s\n%s", what, p.log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitForState polls the message id until it is in state, and returns it;
// at deadline it fails with what it read last and the process's log.
func waitForState(t *testing.T, p *process, c *api.Client, id string, state courier.State, deadline time.Time) *api.Message {
	t.Helper()
	for {
		m, err := c.Message(context.Background(), id)
		if err == nil && m.State == state {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not %s: %+v, %v\n%s", id, state, m, err, p.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// countByID counts arrivals by their message's id (webhook-id, which for
// the delivery of a published message is "<id>/<subscription>").
func countByID(arrivals []sink.Arrival) map[string]int {
	seen := map[string]int{}
	for _, a := range arrivals {
		id, _ := courier.ParseKey(a.Header.Get("webhook-id"))
		seen[id]++
	}
	return seen
}

// arrivalsByID counts the arrivals of each message id at the sink, once n
// distinct ids have arrived and stragglers had time to come.
func arrivalsByID(t *testing.T, sk *sink.Sink, n int, within time.Duration) map[string]int {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		seen := countByID(sk.All())
		if len(seen) >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages arrived within %v", len(seen), n, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second) // anything sent twice would arrive now
	return countByID(sk.All())
}

// allMessages lists every message of the store that f matches, page by
// page.
func allMessages(t *testing.T, s courier.Store, f courier.MessageFilter) []*courier.Message {
	t.Helper()
	var out []*courier.Message
	f.Limit = courier.MaxListLimit
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

// inflightMessages lists every message the store has in flight: after a
// kill, the messages that may be delivered twice.
func inflightMessages(t *testing.T, s courier.Store) []*courier.Message {
	t.Helper()
	return allMessages(t, s, courier.MessageFilter{State: courier.StateInflight})
}

// inflightInSQLite lists the messages in flight in the SQLite store at
// path, which no process has open any more.
func inflightInSQLite(t *testing.T, path string) []*courier.Message {
	t.Helper()
	store, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	return inflightMessages(t, store)
}

// putAnswer is what a node answered one PUT of putEach.
type putAnswer struct {
	id         string
	node       int // its index among the nodes given
	status     int // 0: no answer (err)
	err        error
	body       string // of an answer other than 201 or 503
	sent, done time.Time
}

// putEach sends new messages of type order to route r, one PUT after
// another from each of workers goroutines, to the nodes in turn, until
// the stop it returns is called (which waits for the workers); answer
// hears of each. After an answer other than 201 a worker pauses a moment,
// as a client's retry would.
func putEach(nodes []*process, workers int, timeout time.Duration, answer func(putAnswer)) (stop func()) {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	client := &http.Client{Timeout: timeout}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-quit:
					return
				default:
				}
				id := fmt.Sprintf("w%d-%06d", w, i)
				a := putAnswer{id: id, node: (w + i) % len(nodes), sent: time.Now()}
				req, _ := http.NewRequest(http.MethodPut, nodes[a.node].url+"/v1/messages/"+id,
					strings.NewReader(`{"type":"order","route":"r","payload":{"id":"`+id+`"}}`))
				resp, err := client.Do(req)
				if err != nil {
					a.err = err
				} else {
					a.status = resp.StatusCode
					if a.status != http.StatusCreated && a.status != http.StatusServiceUnavailable {
						body, _ := io.ReadAll(resp.Body)
						a.body = string(body)
					}
					resp.Body.Close()
				}
				a.done = time.Now()
				answer(a)
				if a.status != http.StatusCreated {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	return sync.OnceFunc(func() { close(quit); wg.Wait() })
}
