package file_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/courier-gw/courier"
	filetransport "github.com/courier-gw/courier/transport/file"
)

var created = time.Date(2026, 11, 21, 10, 0, 5, 0, time.UTC)

func newTransport(t *testing.T) *filetransport.Transport {
	t.Helper()
	tr := filetransport.New(filetransport.Options{Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(tr.Close)
	return tr
}

func endpoint(dir, name string) *courier.Endpoint {
	e := courier.NewEndpoint("vans", courier.TransportFile)
	e.Settings = &filetransport.Settings{Dir: dir, Name: name}
	return e
}

func message(id string, payload string) *courier.Message {
	return &courier.Message{ID: id, Type: "invoice", Route: "vans", Payload: []byte(payload),
		ContentType: "application/xml", CreatedAt: created}
}

func send(t *testing.T, tr *filetransport.Transport, e *courier.Endpoint, m *courier.Message) courier.Result {
	t.Helper()
	return tr.Send(context.Background(), courier.Delivery{Message: m, Endpoint: e, Attempt: 1})
}

func TestFileName(t *testing.T) {
	t.Parallel()
	m := message("inv-2026:7", "")
	for _, tc := range []struct {
		template, want, err string
	}{
		{"", "inv-2026:7", ""},
		{"{id}", "inv-2026:7", ""},
		{"{type}-{id}.xml", "invoice-inv-2026:7.xml", ""},
		{"{time}_{id}", "20261121T100005Z_inv-2026:7", ""},
		{"{id}{id}", "inv-2026:7inv-2026:7", ""},
		{"fixed.xml", "fixed.xml", ""},
	} {
		got, err := filetransport.FileName(tc.template, m, time.Time{})
		if got != tc.want || (err != nil) != (tc.err != "") {
			t.Errorf("FileName(%q) = %q, %v; want %q", tc.template, got, err, tc.want)
		}
	}
	// A message without a creation time is named after now.
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	if got, _ := filetransport.FileName("{time}", &courier.Message{ID: "a"}, now); got != "20260102T020405Z" {
		t.Errorf("FileName without a creation time = %q", got)
	}
	if _, err := filetransport.FileName("..", m, now); err == nil {
		t.Error("FileName(..) took a name that leaves the directory")
	}
	if _, err := filetransport.FileName(".courier-{id}.tmp", &courier.Message{ID: "x"}, now); err == nil {
		t.Error("FileName took the name of a temporary file")
	}
}

func TestWritesTheFileAndNothingElse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tr := newTransport(t)
	res := send(t, tr, endpoint(dir, "{type}-{id}.xml"), message("inv-1", "<Invoice>1</Invoice>"))
	if !res.Delivered() || res.Response != "wrote invoice-inv-1.xml (20 bytes)" {
		t.Fatalf("result %+v", res)
	}
	got, err := os.ReadFile(filepath.Join(dir, "invoice-inv-1.xml"))
	if err != nil || string(got) != "<Invoice>1</Invoice>" {
		t.Fatalf("file: %q, %v", got, err)
	}
	if names := dirNames(t, dir); len(names) != 1 {
		t.Errorf("directory holds %v, want only the file (no temporary left behind)", names)
	}
	info, _ := os.Stat(filepath.Join(dir, "invoice-inv-1.xml"))
	if info.Mode().Perm()&0o044 == 0 {
		t.Errorf("mode %v: the pick-up process cannot read it", info.Mode())
	}
}

func TestNeverOverwrites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tr := newTransport(t)
	e := endpoint(dir, "{id}.xml")

	if res := send(t, tr, e, message("inv-1", "<a/>")); !res.Delivered() {
		t.Fatal(res)
	}
	// The same message again (a retry whose outcome was lost) is delivered
	// without touching the file.
	before, _ := os.Stat(filepath.Join(dir, "inv-1.xml"))
	res := send(t, tr, e, message("inv-1", "<a/>"))
	if !res.Delivered() || !strings.Contains(res.Response, "there already with the same 4 bytes") {
		t.Fatalf("same content again: %+v", res)
	}
	after, _ := os.Stat(filepath.Join(dir, "inv-1.xml"))
	if !os.SameFile(before, after) {
		t.Error("the file was replaced")
	}
	// Other content under that name is refused, and the file stays.
	for _, other := range []string{"<b/>", "<a/> and more"} {
		res = send(t, tr, e, message("inv-1", other))
		if res.Class != courier.ClassTransport || !strings.Contains(res.Error, "exists with other content") {
			t.Errorf("other content %q: %+v", other, res)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "inv-1.xml")); string(got) != "<a/>" {
		t.Errorf("file now %q", got)
	}
	if names := dirNames(t, dir); len(names) != 1 {
		t.Errorf("directory holds %v", names)
	}
}

// TestConcurrentSameMessage sends one message from many goroutines at once:
// exactly one writes it, all count it delivered.
func TestConcurrentSameMessage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tr := newTransport(t)
	e := endpoint(dir, "{id}")
	var wg sync.WaitGroup
	var wrote atomic.Int32
	for range 16 {
		wg.Go(func() {
			res := send(t, tr, e, message("inv-1", strings.Repeat("x", 100_000)))
			if !res.Delivered() {
				t.Errorf("result %+v", res)
			}
			if strings.HasPrefix(res.Response, "wrote") {
				wrote.Add(1)
			}
		})
	}
	wg.Wait()
	if wrote.Load() != 1 {
		t.Errorf("%d attempts wrote the file, want 1", wrote.Load())
	}
	if names := dirNames(t, dir); len(names) != 1 {
		t.Errorf("directory holds %v", names)
	}
}

// TestSomethingElseThere finds no regular file under the name: a
// directory, a symbolic link to the same content, a FIFO (which would block
// a reader). None is replaced or counted as delivered, and none blocks.
func TestSomethingElseThere(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "a-dir"), 0o755)
	os.WriteFile(filepath.Join(dir, "real"), []byte("x"), 0o644)
	os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "a-link"))
	if err := syscall.Mkfifo(filepath.Join(dir, "a-fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr := newTransport(t)
	for _, id := range []string{"a-dir", "a-link", "a-fifo"} {
		res := send(t, tr, endpoint(dir, "{id}"), message(id, "x"))
		if res.Class != courier.ClassTransport || !strings.Contains(res.Error, "(no regular file); not overwritten") {
			t.Errorf("%s: %+v", id, res)
		}
	}
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	tr := newTransport(t)
	notADir := filepath.Join(t.TempDir(), "file")
	os.WriteFile(notADir, nil, 0o644)
	for _, tc := range []struct {
		name  string
		e     *courier.Endpoint
		m     *courier.Message
		class courier.ErrorClass
		msg   string
	}{
		{"missing directory", endpoint(filepath.Join(t.TempDir(), "gone"), "{id}"), message("a", "x"), courier.ClassTransport, "does not exist"},
		{"not a directory", endpoint(notADir, "{id}"), message("a", "x"), courier.ClassTransport, "is not a directory"},
		{"name too long", endpoint(t.TempDir(), "{id}{id}"), message(strings.Repeat("n", 200), "x"), courier.ClassRejected, "too long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := send(t, tr, tc.e, tc.m)
			if res.Class != tc.class || !strings.Contains(res.Error, tc.msg) {
				t.Errorf("got %s %q, want %s with %q", res.Class, res.Error, tc.class, tc.msg)
			}
		})
	}
}

// TestPermissionDenied writes into a directory this process may not write
// to: read-only by mode, or immutable when the tests run as root (whom modes
// do not stop).
func TestPermissionDenied(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
			t.Skipf("running as root and cannot make a directory immutable: %v %s", err, out)
		}
		t.Cleanup(func() { exec.Command("chattr", "-i", dir).Run() })
	} else {
		os.Chmod(dir, 0o555)
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
	}
	res := send(t, newTransport(t), endpoint(dir, "{id}"), message("a", "x"))
	if res.Class != courier.ClassTransport || !strings.Contains(res.Error, "permission denied") {
		t.Errorf("got %+v, want transport: permission denied", res)
	}
}

// TestNoPartialFileIsEverVisible writes 10,000 files from several
// goroutines while a reader polls the directory and reads every file that
// is not a temporary one: each must be complete when it appears.
func TestNoPartialFileIsEverVisible(t *testing.T) {
	const files, writers = 10_000, 4
	n := files
	if testing.Short() {
		n = 1_000
	}
	dir := t.TempDir()
	tr := newTransport(t)
	e := endpoint(dir, "{id}.dat")
	payload := func(i int) []byte {
		// Sizes up to 96 KiB, so a write takes several system calls and a
		// non-atomic one would be caught half-way.
		return bytes.Repeat([]byte(fmt.Sprintf("%07d;", i)), 1+(i*37)%12_000)
	}

	done := make(chan struct{})
	var checked, polls atomic.Int64
	var reader sync.WaitGroup
	reader.Go(func() {
		seen := map[string]bool{}
		for {
			finished := false
			select {
			case <-done:
				finished = true // one more pass after the last write
			default:
			}
			polls.Add(1)
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Error(err)
				return
			}
			for _, ent := range entries {
				name := ent.Name()
				if strings.HasPrefix(name, filetransport.TempPrefix) || seen[name] {
					continue
				}
				var i int
				if _, err := fmt.Sscanf(name, "m%d.dat", &i); err != nil {
					t.Errorf("unexpected file %q", name)
					continue
				}
				got, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					t.Errorf("read %s: %v", name, err)
					continue
				}
				if !bytes.Equal(got, payload(i)) {
					t.Errorf("%s visible with %d bytes, want %d", name, len(got), len(payload(i)))
				}
				seen[name] = true
				checked.Add(1)
			}
			if finished {
				return
			}
		}
	})

	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range writers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				m := message(fmt.Sprintf("m%d", i), "")
				m.Payload = payload(i)
				if res := send(t, tr, e, m); !res.Delivered() {
					t.Errorf("m%d: %+v", i, res)
				}
			}
		})
	}
	wg.Wait()
	close(done)
	reader.Wait()
	if got := checked.Load(); got != int64(n) {
		t.Errorf("reader checked %d files, want %d", got, n)
	}
	if names := dirNames(t, dir); len(names) != n {
		t.Errorf("%d entries in the directory, want %d (temporary files left behind?)", len(names), n)
	}
	t.Logf("%d files, %d polls of the directory", n, polls.Load())
}
