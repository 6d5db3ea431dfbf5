package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/courier-gw/courier/internal/testkit/blobtest"
	"github.com/courier-gw/courier/internal/testkit/pgtest"
	"github.com/jackc/pgx/v5"
)

// hashingReceiver is a receiver on loopback that hashes each body as it
// streams in, keeping nothing of it, optionally reading no faster than
// rate bytes per second.
type hashingReceiver struct {
	*httptest.Server
	rate int64 // bytes a second; 0 reads as fast as it can

	mu       sync.Mutex
	complete []arrival // bodies read to their end
	reading  int64     // bytes of the body being read now
}

type arrival struct {
	id     string
	size   int64
	sha256 string
}

func newHashingReceiver(t *testing.T, rate int64) *hashingReceiver {
	rc := &hashingReceiver{rate: rate}
	rc.Server = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *hashingReceiver) serve(w http.ResponseWriter, r *http.Request) {
	h := sha256.New()
	n, err := rc.read(h, r.Body)
	if err != nil {
		return // the sender went away: no arrival
	}
	rc.mu.Lock()
	rc.complete = append(rc.complete, arrival{id: r.Header.Get("webhook-id"), size: n, sha256: hex.EncodeToString(h.Sum(nil))})
	rc.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// read copies body into h, paced to rate, counting the bytes in reading.
func (rc *hashingReceiver) read(h hash.Hash, body io.Reader) (int64, error) {
	rc.mu.Lock()
	rc.reading = 0
	rc.mu.Unlock()
	buf := make([]byte, 256<<10)
	var n int64
	start := time.Now()
	for {
		k, err := body.Read(buf)
		h.Write(buf[:k])
		n += int64(k)
		rc.mu.Lock()
		rc.reading = n
		rc.mu.Unlock()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if rc.rate > 0 {
			if ahead := time.Duration(n*int64(time.Second)/rc.rate) - time.Since(start); ahead > 0 {
				time.Sleep(ahead)
			}
		}
	}
}

func (rc *hashingReceiver) arrivals() []arrival {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]arrival(nil), rc.complete...)
}

func (rc *hashingReceiver) bytesRead() int64 {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.reading
}

// largeConfig routes "big" to rc with a long timeout, and takes payloads
// up to 1 GiB.
func largeConfig(rc *hashingReceiver) string {
	return fmt.Sprintf(`max_payload: 1GiB
endpoints:
  big: {transport: http, url: "%s/in", timeout: 10m}
routes:
  big: {endpoints: [big]}
`, rc.URL)
}

// putLarge sends body as the payload of message id to route big, raw.
func putLarge(p *process, id string, body io.Reader, size int64) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPut, p.url+"/v1/messages/"+id, body)
	if err != nil {
		return nil, err
	}
	req.ContentLength = size
	req.Header.Set("Courier-Type", "catalogue")
	req.Header.Set("Courier-Route", "big")
	req.Header.Set("Content-Type", "application/octet-stream")
	return http.DefaultClient.Do(req)
}

// peakRSS is the most resident memory the process ever had (VmHWM), in
// bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc to read the memory of courier from: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/<pid>/status")
	return 0
}

// blobFiles lists the files of a SQLite store's blob area.
func blobFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(storePath(dir) + "-blobs")
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func waitForArrival(t *testing.T, rc *hashingReceiver, id string, within time.Duration) arrival {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, a := range rc.arrivals() {
			if a.id == id {
				return a
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("message %s did not arrive whole within %v (%d bytes of a body read)", id, within, rc.bytesRead())
	return arrival{}
}

// A 1 GiB payload goes in and out of courier streamed: the receiver gets
// the same bytes, and courier's memory never comes near the payload's
// size.
func TestLargePayloadStreamsThrough(t *testing.T) {
	skipIfShort(t)
	rc := newHashingReceiver(t, 0)
	streamThrough(t, rc, startNode(t, t.TempDir(), largeConfig(rc)), 1<<30)
}

// The same on PostgreSQL, whose blobs are large objects: 256 MiB, as the
// database writes each byte twice (its log and its table).
func TestLargePayloadStreamsThroughPostgres(t *testing.T) {
	skipIfShort(t)
	dsn, _ := pgtest.SchemaDSN(t)
	rc := newHashingReceiver(t, 0)
	streamThrough(t, rc, startPostgresNode(t, dsn, largeConfig(rc)), largeOnPostgres)
}

// largeOnPostgres is the payload of the PostgreSQL test.
var largeOnPostgres int64 = 256 << 20

// streamThrough sends a payload of size bytes to p and checks that rc gets
// it whole while p's memory stays under 200 MB.
func streamThrough(t *testing.T, rc *hashingReceiver, p *process, size int64) {
	t.Helper()
	want, _ := blobtest.Digest(t, blobtest.Payload(size, 1))

	start := time.Now()
	resp, err := putLarge(p, "catalogue-2026", blobtest.Payload(size, 1), size)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT of %d MiB: %d %s", size>>20, resp.StatusCode, body)
	}
	ingested := time.Since(start)
	got := waitForArrival(t, rc, "catalogue-2026", 5*time.Minute)
	if got.size != size || got.sha256 != want {
		t.Fatalf("the receiver got %d bytes with SHA-256 %s; want %d bytes with %s", got.size, got.sha256, size, want)
	}
	peak := peakRSS(t, p.cmd.Process.Pid)
	t.Logf("%d MiB: ingested in %v, delivered %v after; courier's peak RSS %d MB", size>>20, ingested.Round(time.Millisecond),
		(time.Since(start) - ingested).Round(time.Millisecond), peak>>20)
	if peak > 200<<20 {
		t.Fatalf("courier's resident memory peaked at %d MB while a payload of %d MiB went through; want under 200 MB", peak>>20, size>>20)
	}
}

// A SIGKILL in the middle of an upload leaves nothing: no message, and,
// once the restarted node has swept, no blob.
func TestKillDuringUpload(t *testing.T) {
	skipIfShort(t)
	rc := newHashingReceiver(t, 0)
	dir := t.TempDir()
	p := startNode(t, dir, largeConfig(rc))
	killUploading(t, p, func() {
		if files := blobFiles(t, dir); len(files) != 1 || !strings.HasSuffix(files[0], ".part") {
			t.Fatalf("while uploading the blob area holds %v; want the one part file", files)
		}
	})
	p = startServerWith(t, p.config)
	if status := p.get(t, "/v1/messages/cut-off"); status != http.StatusNotFound {
		t.Fatalf("the message whose upload was cut off: %d, want 404", status)
	}
	waitUntil(t, p, 30*time.Second, "the blob area to be empty", func() bool { return len(blobFiles(t, dir)) == 0 })
}

// The same on PostgreSQL: the large object being written goes with the
// transaction the kill cut off, and courier recorded none.
func TestKillDuringUploadPostgres(t *testing.T) {
	skipIfShort(t)
	dsn, _ := pgtest.SchemaDSN(t)
	rc := newHashingReceiver(t, 0)
	p := startPostgresNode(t, dsn, largeConfig(rc))
	blobObjects := func() int {
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		var n int
		if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM blob_objects`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	killUploading(t, p, func() {})
	p = startServerWith(t, p.config)
	if status := p.get(t, "/v1/messages/cut-off"); status != http.StatusNotFound {
		t.Fatalf("the message whose upload was cut off: %d, want 404", status)
	}
	if n := blobObjects(); n != 0 {
		t.Fatalf("%d large objects recorded after an upload cut off, want none", n)
	}
}

// killUploading starts the upload of a large message "cut-off" to p,
// calls during once a quarter of it is in, then kills p with SIGKILL and
// checks that the upload was not answered.
func killUploading(t *testing.T, p *process, during func()) {
	t.Helper()
	const size = 256 << 20
	halfway, release := make(chan struct{}), make(chan struct{})
	body := &signalAfter{r: blobtest.Payload(size, 2), after: 64 << 20, reached: halfway, hold: release}
	done := make(chan error, 1)
	go func() {
		resp, err := putLarge(p, "cut-off", body, size)
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("the upload was answered %d", resp.StatusCode)
		}
		done <- err
	}()
	<-halfway
	during()
	p.kill(t)
	close(release)
	if err := <-done; err == nil {
		t.Fatal("the upload cut off by SIGKILL was answered")
	}
}

// signalAfter closes reached once after bytes have been read, and then
// holds the upload open until hold is closed.
type signalAfter struct {
	r       io.Reader
	n       int64
	after   int64
	reached chan struct{}
	hold    chan struct{}
}

func (s *signalAfter) Read(p []byte) (int, error) {
	if s.n >= s.after && s.reached != nil {
		close(s.reached)
		s.reached = nil
		<-s.hold
	}
	n, err := s.r.Read(p)
	s.n += int64(n)
	return n, err
}

// A SIGKILL in the middle of a large delivery: after the restart the payload is
// sent again from storage, and the receiver gets identical bytes.
func TestKillDuringLargeDelivery(t *testing.T) {
	skipIfShort(t)
	const size = 96 << 20
	rc := newHashingReceiver(t, 24<<20) // four seconds for the body
	dir := t.TempDir()
	p := startNode(t, dir, largeConfig(rc))
	want, _ := blobtest.Digest(t, blobtest.Payload(size, 3))
	resp, err := putLarge(p, "resent", blobtest.Payload(size, 3), size)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT: %d", resp.StatusCode)
	}
	waitUntil(t, p, time.Minute, "the delivery to be under way", func() bool { return rc.bytesRead() > 16<<20 })
	p.kill(t)
	if len(rc.arrivals()) != 0 {
		t.Fatal("the body arrived whole before the kill; the test needs a slower receiver")
	}

	startServerWith(t, p.config)
	got := waitForArrival(t, rc, "resent", 2*time.Minute)
	if got.size != size || got.sha256 != want {
		t.Fatalf("after the restart the receiver got %d bytes with SHA-256 %s; want %d bytes with %s", got.size, got.sha256, int64(size), want)
	}
}

// get returns the status of a GET of path.
func (p *process) get(t *testing.T, path string) int {
	t.Helper()
	resp, err := http.Get(p.url + path)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
