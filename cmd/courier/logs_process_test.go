package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/courier-gw/courier/internal/testkit/httpcheck"
)

// With log.format json, every line courier serve writes on standard error
// is a JSON object, the lines of the libraries it uses too: here an OTLP
// export that fails, to a port where nothing listens. Durations are
// written as Go writes them ("20s"), not as integers of nanoseconds.
func TestJSONLogsAreJSONThroughout(t *testing.T) {
	skipIfShort(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "courier.yaml")
	closed := freeAddr(t) // nothing listens here
	writeFile(t, cfg, fmt.Sprintf(`listen: %s
store: {driver: sqlite, path: %s}
log: {format: json, level: debug}
tracing: {endpoint: "http://%s", sample: 1}
endpoints:
  down: {transport: http, url: "http://%s/in", allow_networks: [127.0.0.0/8]}
routes:
  down: {endpoints: [down]}
`, freeAddr(t), storePath(dir), closed, closed))

	cmd := exec.Command(courierBin, "serve", "--config", cfg)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var stderr bytes.Buffer
	cmd.Stderr = writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return stderr.Write(p)
	})
	logged := func() string {
		mu.Lock()
		defer mu.Unlock()
		return stderr.String()
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	listening := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`listening on (https?://\S+)`)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				listening <- m[1]
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	var url string
	select {
	case url = <-listening:
	case <-time.After(30 * time.Second):
		t.Fatalf("courier serve did not start\n%s", logged())
	}

	// A message makes spans to export, and attempts that fail.
	req, _ := http.NewRequest(http.MethodPut, url+"/v1/messages/m-1", strings.NewReader(`{"type":"invoice","route":"down","payload":1}`))
	httpcheck.Expect(t, nil, req, http.StatusCreated)
	deadline := time.Now().Add(60 * time.Second) // the exporter sends every 5 s
	for !strings.Contains(logged(), "traces export") {
		if time.Now().After(deadline) {
			t.Fatalf("no failed OTLP export was logged:\n%s", logged())
		}
		time.Sleep(100 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("courier serve: %v\n%s", err, logged())
	}

	lines := strings.Split(strings.TrimSuffix(logged(), "\n"), "\n")
	durations := 0
	for _, line := range lines {
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Errorf("a line of the log is not JSON: %q", line)
			continue
		}
		for k, v := range entry {
			if !strings.Contains(k, "timeout") && !strings.Contains(k, "duration") {
				continue
			}
			durations++
			if s, ok := v.(string); !ok {
				t.Errorf("%s is %v in %q, want a duration such as \"20s\"", k, v, line)
			} else if _, err := time.ParseDuration(s); err != nil {
				t.Errorf("%s is %q in %q, want a duration such as \"20s\"", k, s, line)
			}
		}
	}
	if durations < 2 { // the pool's connect_timeout, the shutdown's timeout
		t.Errorf("%d durations logged, want the connect timeout and the shutdown's at least:\n%s", durations, logged())
	}
}

// writerFunc is a func as an io.Writer.
type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
