package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/internal/testkit/sink"
	"github.com/courier-gw/courier/sqlite"
)

// floodSize is how hard TestIngestFlood floods: batch senders, the batches
// each sends, the messages of a batch, connections of single PUTs and the
// PUTs each sends.
type floodSize struct {
	batchSenders, batches, batchItems, putConns, puts int
}

// The flood of the suite, and the one measured in docs/measuring.md
// (COURIER_TEST_FLOOD=full): sixteen senders of 10,000-message batches of
// about 11 MiB and 512 connections of single PUTs.
var (
	floodSmall = floodSize{batchSenders: 8, batches: 1, batchItems: 10000, putConns: 256, puts: 8}
	floodFull  = floodSize{batchSenders: 16, batches: 3, batchItems: 10000, putConns: 512, puts: 20}
)

// floodTally counts the answers of a flood's requests.
type floodTally struct {
	mu       sync.Mutex
	statuses map[int]int
	timeouts int
	errs     []string
	noRetry  int      // refusals (429, 503) without Retry-After
	acked    []string // the ids answered 201 (or 200: a repeat of one stored)
}

func (ft *floodTally) answer(status int, hdr http.Header) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	ft.statuses[status]++
	if (status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable) && hdr.Get("Retry-After") == "" {
		ft.noRetry++
	}
}

func (ft *floodTally) fail(err error) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		ft.timeouts++
		return
	}
	ft.errs = append(ft.errs, err.Error())
}

func (ft *floodTally) ack(ids ...string) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	ft.acked = append(ft.acked, ids...)
}

// TestIngestFlood floods courier on SQLite, with a receiver that answers
// slowly, by batches of 10,000 messages and hundreds of connections of
// single PUTs, each sent again after Retry-After when refused: its memory
// stays under 300 MB, every request is answered (at most 0.5 % time out),
// refusals are 429 or 503 with Retry-After, readiness holds, every message
// acknowledged is in the store afterwards, and a PUT after the flood is
// taken. COURIER_TEST_FLOOD=full floods as docs/measuring.md measures.
func TestIngestFlood(t *testing.T) {
	skipIfShort(t)
	size := floodSmall
	if os.Getenv("COURIER_TEST_FLOOD") == "full" {
		size = floodFull
	}
	sk := sink.MustStart(t, sink.Options{CountOnly: true})
	sk.ScriptLoad("/inbox", func(int) sink.Step { return sink.Delay(200*time.Millisecond, http.StatusOK) })
	secrets := map[string]string{}
	var keys strings.Builder
	for _, name := range []string{"bulk-0", "bulk-1", "bulk-2", "bulk-3", "shop"} {
		secrets[name] = "secret-of-" + name
		fmt.Fprintf(&keys, "  %s: {role: sender, hash: %q}\n", name, api.HashSecret(secrets[name]))
	}
	// COURIER_TEST_FLOOD_MAX_BYTES sets ingest_in_flight.max_bytes (and
	// max_messages, at a million): 1TiB measures the flood unbounded.
	bound := ""
	if v := os.Getenv("COURIER_TEST_FLOOD_MAX_BYTES"); v != "" {
		bound = fmt.Sprintf("ingest_in_flight: {max_bytes: %s, max_messages: 1000000}\n", v)
	}
	dir := t.TempDir()
	p := startNode(t, dir, bound+fmt.Sprintf(`keys:
%s  ops: {role: operator, hash: %q}
endpoints:
  inbox: {transport: http, url: %q, max_concurrency: 16}
routes:
  flood: {endpoints: [inbox]}
`, keys.String(), api.HashSecret("secret-of-ops"), sk.URL()+"/inbox"))

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: size.putConns + size.batchSenders}}
	tally := &floodTally{statuses: map[int]int{}}
	deadline := time.Now().Add(5 * time.Minute)
	// send sends a request until it is taken (2xx) or refused for good,
	// after Retry-After when it is refused for now; it returns the body of
	// the answer taken.
	send := func(key, method, path, body string) ([]byte, int) {
		for time.Now().Before(deadline) {
			req, _ := http.NewRequest(method, p.url+path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+secrets[key])
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				tally.fail(err)
				continue
			}
			data, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				tally.fail(err)
				continue
			}
			tally.answer(resp.StatusCode, resp.Header)
			if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
				return data, resp.StatusCode
			}
			after, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			time.Sleep(time.Duration(max(after, 1)) * time.Second)
		}
		return nil, 0
	}

	pad := strings.Repeat("x", 1024)
	readyz := make(chan []int, 1)
	stopReadyz := make(chan struct{})
	go func() { // readiness, polled through the flood
		var bad []int
		for {
			select {
			case <-stopReadyz:
				readyz <- bad
				return
			case <-time.After(500 * time.Millisecond):
			}
			resp, err := client.Get(p.url + "/readyz")
			if err != nil {
				bad = append(bad, 0)
				continue
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				bad = append(bad, resp.StatusCode)
			}
		}
	}()
	if procStatus(p.cmd.Process.Pid, "VmRSS") == 0 {
		t.Skip("no /proc to read the memory of courier from")
	}
	var peak atomic.Int64
	stopRSS := make(chan struct{})
	rssDone := make(chan struct{})
	go func() { // the resident memory, sampled through the flood
		defer close(rssDone)
		for {
			peak.Store(max(peak.Load(), procStatus(p.cmd.Process.Pid, "VmRSS")))
			select {
			case <-stopRSS:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()

	start := time.Now()
	var wg sync.WaitGroup
	for s := range size.batchSenders {
		wg.Go(func() {
			key := fmt.Sprintf("bulk-%d", s%4)
			for b := range size.batches {
				var sb strings.Builder
				sb.WriteString(`{"messages":[`)
				for i := range size.batchItems {
					if i > 0 {
						sb.WriteByte(',')
					}
					fmt.Fprintf(&sb, `{"id":"b%d-%d-%d","type":"flood","route":"flood","payload":{"n":%d,"pad":%q}}`, s, b, i, i, pad)
				}
				sb.WriteString(`]}`)
				body, status := send(key, "POST", "/v1/messages/batch", sb.String())
				if status != http.StatusOK {
					tally.fail(fmt.Errorf("batch b%d-%d: %d %s", s, b, status, body))
					continue
				}
				var res api.BatchResponse
				if err := json.Unmarshal(body, &res); err != nil {
					tally.fail(fmt.Errorf("batch b%d-%d: %v", s, b, err))
					continue
				}
				var ids []string
				for _, r := range res.Results {
					if r.Status == http.StatusCreated || r.Status == http.StatusOK {
						ids = append(ids, r.ID)
					} else {
						tally.fail(fmt.Errorf("batch item %s: %d %+v", r.ID, r.Status, r.Error))
					}
				}
				tally.ack(ids...)
			}
		})
	}
	for c := range size.putConns {
		wg.Go(func() {
			for j := range size.puts {
				id := fmt.Sprintf("s%d-%d", c, j)
				body, status := send("shop", "PUT", "/v1/messages/"+id, `{"type":"flood","route":"flood","payload":{"n":1}}`)
				if status == http.StatusCreated || status == http.StatusOK {
					tally.ack(id)
				} else {
					tally.fail(fmt.Errorf("PUT %s: %d %s", id, status, body))
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	close(stopReadyz)
	badReady := <-readyz

	after := time.Now()
	req, _ := http.NewRequest("PUT", p.url+"/v1/messages/after-the-flood", strings.NewReader(`{"type":"flood","route":"flood","payload":{"n":1}}`))
	req.Header.Set("Authorization", "Bearer "+secrets["shop"])
	resp, err := client.Do(req)
	if err != nil {
		t.Errorf("PUT after the flood: %v", err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusCreated {
		t.Errorf("PUT after the flood: %s, want 201", resp.Status)
	}
	close(stopRSS)
	<-rssDone
	hwm := procStatus(p.cmd.Process.Pid, "VmHWM")

	requests := tally.timeouts + len(tally.errs)
	for _, n := range tally.statuses {
		requests += n
	}
	t.Logf("flood %+v in %v: %d requests, answers %v, %d timed out; RSS peak %d MB (VmHWM %d MB); readyz not 200: %v; PUT after the flood took %v",
		size, took.Round(time.Millisecond), requests, tally.statuses, tally.timeouts, peak.Load()>>20, hwm>>20, badReady, time.Since(after).Round(time.Millisecond))
	if hwm > 300e6 {
		t.Errorf("courier's resident memory peaked at %d MB, want under 300", hwm>>20)
	}
	if len(tally.errs) > 0 {
		var said []string
		for _, l := range strings.Split(p.log(), "\n") {
			if strings.Contains(l, "panic") || strings.Contains(l, "http: ") || strings.Contains(l, "level=ERROR") {
				said = append(said, l)
			}
		}
		t.Errorf("%d requests not answered, first: %s; courier said:\n%s", len(tally.errs), tally.errs[0], strings.Join(said[:min(len(said), 20)], "\n"))
	}
	if float64(tally.timeouts) > 0.005*float64(requests) {
		t.Errorf("%d of %d requests timed out, more than 0.5 %%", tally.timeouts, requests)
	}
	for status, n := range tally.statuses {
		switch status {
		case http.StatusOK, http.StatusCreated, http.StatusTooManyRequests, http.StatusServiceUnavailable:
		default:
			t.Errorf("%d requests answered %d", n, status)
		}
	}
	if tally.noRetry > 0 {
		t.Errorf("%d refusals without Retry-After", tally.noRetry)
	}
	if len(badReady) > 0 {
		t.Errorf("readyz answered %v during the flood, want 200", badReady)
	}

	// Everything acknowledged is in the store.
	if err := p.terminate(t, time.Minute); err != nil {
		t.Logf("exit: %v", err)
	}
	store, err := sqlite.Open(storePath(dir), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	stored := map[string]bool{}
	for _, m := range allMessages(t, store, courier.MessageFilter{}) {
		stored[m.ID] = true
	}
	want := size.batchSenders*size.batches*size.batchItems + size.putConns*size.puts
	if len(tally.acked) != want {
		t.Errorf("%d messages acknowledged, want %d", len(tally.acked), want)
	}
	lost := 0
	for _, id := range tally.acked {
		if !stored[id] {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged messages are not in the store", lost, len(tally.acked))
	}
}

// procStatus reads a field of /proc/PID/status given in kB (VmRSS,
// VmHWM), in bytes; 0 when there is none.
func procStatus(pid int, field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
