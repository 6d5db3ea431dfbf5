package receiver_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/pgtest"
	"github.com/courier-gw/courier/internal/testkit/poll"
	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
	"github.com/courier-gw/courier/internal/testkit/startstoptest"
	"github.com/courier-gw/courier/receiver"
	"github.com/courier-gw/courier/storetest"
	filetransport "github.com/courier-gw/courier/transport/file"
)

// stores are the stores a test of blobs runs on: SQLite always, PostgreSQL
// when the environment names one (the subtest skips otherwise).
var stores = []struct {
	name string
	open func(t *testing.T) courier.Store
}{
	{"sqlite", func(t *testing.T) courier.Store { return sqlitetest.Open(t) }},
	{"postgres", func(t *testing.T) courier.Store { return pgtest.Open(t) }},
}

// patterned returns n bytes that differ from one position to the next, so
// that content read back out of order or cut short does not compare equal.
func patterned(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7) ^ byte(i>>13) ^ seed
	}
	return p
}

// dirService runs a receiver service with one pick-up directory on dir,
// storing into store with max_payload maxPayload, and stops it at the end
// of the test.
func dirService(t *testing.T, store courier.Store, dir string, maxPayload int64) *receiver.Service {
	t.Helper()
	top := &courier.Topology{
		Routes:   map[string]*courier.Route{"acme": {Name: "acme", Endpoints: []string{"a"}}},
		Policies: map[string]*courier.Policy{courier.DefaultPolicyName: courier.DefaultPolicy()},
	}
	r := &courier.Receiver{Name: "drop", Transport: courier.ReceiveDir, Type: "invoice", Route: "acme", Batch: 10,
		OnError: courier.OnErrorSuspend, Dir: courier.DirSource{Path: dir, Settle: 50 * time.Millisecond}}
	svc := receiver.New(receiver.Options{Store: store, Receivers: []*courier.Receiver{r}, MaxPayload: maxPayload,
		TopologyFunc: func() *courier.Topology { return top },
		OpenFunc: func(_ context.Context, r *courier.Receiver) (courier.Source, error) {
			return filetransport.OpenPickup(r)
		},
		RetryInitial: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond})
	startstoptest.Start(t, svc)
	return svc
}

// writeFile puts a complete file into dir, written beside it under a
// hidden name and renamed, as a careful writer does.
func writeFile(t *testing.T, dir, name string, content []byte) {
	t.Helper()
	tmp := filepath.Join(dir, "."+name)
	if err := os.WriteFile(tmp, content, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// processed lists the files moved into dir's processed folder.
func processed(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, filetransport.ProcessedDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil // the receiver has not opened the directory yet
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// storedMessages lists every stored message, read whole, by file name.
func storedMessages(t *testing.T, s courier.Store) map[string]*courier.Message {
	t.Helper()
	page, err := s.Messages(context.Background(), courier.MessageFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*courier.Message{}
	for _, m := range page.Messages {
		full, err := s.Message(context.Background(), m.ID)
		if err != nil {
			t.Fatal(err)
		}
		out[full.ID] = full
	}
	return out
}

// Large files in a pick-up directory are streamed into the store's blob
// area, one blob per commit, and read back as they were; a small one stays
// in its row. The same file picked up again is the same message: its
// second copy is not kept.
func TestDirectoryLargeFilesBecomeBlobs(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			s := st.open(t)
			dir := t.TempDir()
			files := map[string][]byte{
				"a.bin":   patterned(12<<20, 1),
				"b.bin":   patterned(5<<20+3, 2),
				"c.bin":   patterned(courier.InlineMax+1, 3),
				"d.json":  []byte(`{"small": true}`),
				"e.empty": {},
			}
			var blobBytes int64
			for name, content := range files {
				writeFile(t, dir, name, content)
				if len(content) > courier.InlineMax {
					blobBytes += int64(len(content))
				}
			}
			svc := dirService(t, s, dir, 64<<20)
			poll.Until(t, "every file processed", func() bool { return len(processed(t, dir)) == len(files) })
			poll.Until(t, "every file counted", func() bool { return svc.Statuses()[0].Received == int64(len(files)) })

			msgs := storedMessages(t, s)
			if len(msgs) != len(files) {
				t.Fatalf("%d messages stored, want %d", len(msgs), len(files))
			}
			byContent := map[string]*courier.Message{}
			for _, m := range msgs {
				if m.State != courier.StateQueued || m.Route != "acme" {
					t.Errorf("%s: %s on %q (%s)", m.ID, m.State, m.Route, m.LastError)
				}
				byContent[courier.PayloadDigest(storetest.ReadPayload(t, s, m))] = m
			}
			for name, content := range files {
				m := byContent[courier.PayloadDigest(content)]
				switch {
				case m == nil:
					t.Errorf("%s: no message has its content", name)
				case len(content) > courier.InlineMax:
					if !m.HasBlob() || len(m.Payload) != 0 || m.Size != len(content) || m.Digest != courier.PayloadDigest(content) {
						t.Errorf("%s: blob %q, %d bytes in the row, size %d, digest %s; want a blob of %d bytes",
							name, m.Blob, len(m.Payload), m.Size, m.Digest, len(content))
					}
					if !bytes.Equal(storetest.ReadPayload(t, s, m), content) {
						t.Errorf("%s: the blob read back differs", name)
					}
				default:
					if m.HasBlob() || !bytes.Equal(m.Payload, content) || m.Size != len(content) {
						t.Errorf("%s: blob %q, payload %q, size %d; want it in the row", name, m.Blob, m.Payload, m.Size)
					}
				}
			}
			storetest.WantBlobUsage(t, s, 3, blobBytes)

			// Picked up again (a crash before the move, or the same file
			// dropped twice): the same messages, no second blob.
			writeFile(t, dir, "a.bin", files["a.bin"])
			writeFile(t, dir, "d.json", files["d.json"])
			poll.Until(t, "the repeats processed", func() bool { return len(processed(t, dir)) == len(files)+2 })
			if got := storedMessages(t, s); len(got) != len(files) {
				t.Fatalf("%d messages after the repeats, want %d", len(got), len(files))
			}
			storetest.WantBlobUsage(t, s, 3, blobBytes)
			if st := svc.Statuses()[0]; st.Received != int64(len(files)) || st.State != courier.ReceiverRunning {
				t.Fatalf("status %+v", st)
			}
		})
	}
}

// A file over max_payload but within what courier keeps is kept whole, as
// a blob of a suspended message, as a smaller item over max_payload is.
func TestDirectoryOverMaxPayloadKeptAsBlob(t *testing.T) {
	s := sqlitetest.Open(t)
	dir := t.TempDir()
	content := patterned(3<<20, 4)
	writeFile(t, dir, "big.bin", content)
	svc := dirService(t, s, dir, 2<<20)
	poll.Until(t, "the file processed", func() bool { return len(processed(t, dir)) == 1 })
	poll.Until(t, "the file counted", func() bool { return svc.Statuses()[0].Invalid == 1 })
	msgs := storedMessages(t, s)
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	for _, m := range msgs {
		if m.State != courier.StateSuspended || m.Reason != courier.ReasonInvalid || !strings.Contains(m.LastError, "over max_payload") {
			t.Fatalf("%s: %s %s %q", m.ID, m.State, m.Reason, m.LastError)
		}
		if !m.HasBlob() || m.Size != len(content) || !bytes.Equal(storetest.ReadPayload(t, s, m), content) {
			t.Fatalf("%s: blob %q of %d bytes, want the whole content", m.ID, m.Blob, m.Size)
		}
	}
	storetest.WantBlobUsage(t, s, 1, int64(len(content)))
}

// A file larger than courier keeps at all stays in the directory and the
// receiver stops, saying which file and why, whatever on_error says; it
// is not read, and nothing is stored. The files before it are taken.
func TestDirectoryFileTooLargeToKeepStops(t *testing.T) {
	s := sqlitetest.Open(t)
	dir := t.TempDir()
	writeFile(t, dir, "first.json", []byte(`{"n": 1}`))
	huge := filepath.Join(dir, "huge.bin")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	// Sparse: it takes no room, and is never read.
	if err := f.Truncate(courier.MaxPayloadCeiling + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// The first file is older than the huge one, whatever the clock's
	// resolution: files are taken oldest first.
	fi, err := os.Stat(huge)
	if err != nil {
		t.Fatal(err)
	}
	older := fi.ModTime().Add(-time.Second)
	if err := os.Chtimes(filepath.Join(dir, "first.json"), older, older); err != nil {
		t.Fatal(err)
	}
	svc := dirService(t, s, dir, 64<<20)
	poll.Until(t, "the receiver stopped", func() bool { return svc.Statuses()[0].State == courier.ReceiverStopped })
	st := svc.Statuses()[0]
	if !strings.Contains(st.StopReason, "item huge.bin cannot be kept") || !strings.Contains(st.StopReason, "over the 1073741824 bytes courier keeps") {
		t.Fatalf("stop reason %q", st.StopReason)
	}
	if _, err := os.Stat(huge); err != nil {
		t.Fatalf("the huge file is no longer in the directory: %v", err)
	}
	if got := processed(t, dir); !slices.Equal(got, []string{"first.json"}) {
		t.Fatalf("processed %v, want the first file only", got)
	}
	if msgs := storedMessages(t, s); len(msgs) != 1 || st.Received != 1 {
		t.Fatalf("%d messages stored, %d counted; want the first file's", len(msgs), st.Received)
	}
	storetest.WantBlobUsage(t, s, 0, 0)
}

// Items a broker hands over whole are stored as blobs when over
// InlineMax, a batch of them one blob per commit, each acknowledged once;
// redelivered, they keep no second blob.
func TestLargeBodiesBecomeBlobs(t *testing.T) {
	large := func(id string, seed byte) *courier.InboundItem {
		it := item(id, "acme")
		it.Body = patterned(2<<20+int(seed), seed)
		return it
	}
	q := newQueue(large("a", 1), item("b", "acme"), large("c", 2), large("d", 3))
	h := newHarness(t, receiverFor(courier.OnErrorSuspend), q, nil)
	h.waitFor("four acknowledged", func() bool { _, _, acked := q.state(); return acked == 4 })
	var size int64
	for i, id := range []string{"a", "c", "d"} {
		m := h.message(id)
		want := patterned(2<<20+i+1, byte(i+1))
		size += int64(len(want))
		if !m.HasBlob() || m.Size != len(want) || !bytes.Equal(storetest.ReadPayload(t, h.store, m), want) {
			t.Fatalf("%s: blob %q of %d bytes; want the whole body as a blob", id, m.Blob, m.Size)
		}
	}
	if m := h.message("b"); m.HasBlob() || string(m.Payload) != `{"id":"b"}` {
		t.Fatalf("b: blob %q, payload %q", m.Blob, m.Payload)
	}
	storetest.WantBlobUsage(t, h.store, 3, size)
	q.mu.Lock()
	fetches := len(q.fetches)
	q.mu.Unlock()
	if fetches != 1 {
		t.Fatalf("%d fetches; want one batch, stored in several commits", fetches)
	}

	q.put(large("a", 1), large("c", 2))
	h.waitFor("six acknowledged", func() bool { _, _, acked := q.state(); return acked == 6 })
	storetest.WantBlobUsage(t, h.store, 3, size)
	if st := h.svc.Statuses()[0]; st.Received != 4 {
		t.Fatalf("received %d, want 4", st.Received)
	}
}

// An item without an id header gets the same derived id whether it came
// whole or as a blob: a redelivery is the same message either way, and
// the id of a small item is the one it always had.
func TestDerivedIDOfLargeBodies(t *testing.T) {
	r := receiverFor(courier.OnErrorSuspend)
	r.IDHeader = ""
	body := patterned(3<<20, 9)
	q := newQueue(&courier.InboundItem{Body: body, Headers: map[string]string{"x-route": "acme"}},
		&courier.InboundItem{Body: body, Headers: map[string]string{"x-route": "acme"}})
	h := newHarness(t, r, q, nil)
	h.waitFor("two acknowledged", func() bool { _, _, acked := q.state(); return acked == 2 })
	msgs := storedMessages(t, h.store)
	if len(msgs) != 1 {
		t.Fatalf("%d messages stored, want 1", len(msgs))
	}
	for id, m := range msgs {
		if !strings.HasPrefix(id, "erp-") || !m.HasBlob() {
			t.Fatalf("stored %s (blob %q)", id, m.Blob)
		}
	}
	storetest.WantBlobUsage(t, h.store, 1, int64(len(body)))
}

// When the acknowledgement of a commit fails, the source is closed and the
// rest of the batch comes back with the items of that commit: all are
// stored once, and no blob is kept twice.
func TestLargeBodiesAckFails(t *testing.T) {
	large := func(id string, seed byte) *courier.InboundItem {
		it := item(id, "acme")
		it.Body = patterned(2<<20, seed)
		return it
	}
	q := newQueue(large("a", 1), large("b", 2), large("c", 3))
	q.ackFail = 1
	h := newHarness(t, receiverFor(courier.OnErrorSuspend), q, nil)
	h.waitFor("three acknowledged", func() bool { _, _, acked := q.state(); return acked == 3 })
	h.waitFor("three received", func() bool { return h.svc.Statuses()[0].Received == 3 })
	storetest.WantBlobUsage(t, h.store, 3, 3*(2<<20))
	if st := h.svc.Statuses()[0]; st.Redelivered == 0 || st.State != courier.ReceiverRunning {
		t.Fatalf("status %+v; want the batch handed out again, and running", st)
	}
}

// appendOnFetch is a pick-up directory whose first fetch of a file is
// followed by more writing to it, as by a writer that paused longer than
// the settle time.
type appendOnFetch struct {
	*filetransport.Pickup
	dir  string
	more []byte
	done bool
}

func (a *appendOnFetch) Fetch(ctx context.Context, max int) ([]*courier.InboundItem, error) {
	items, err := a.Pickup.Fetch(ctx, max)
	if len(items) > 0 && !a.done {
		a.done = true
		f, ferr := os.OpenFile(filepath.Join(a.dir, items[0].Name), os.O_APPEND|os.O_WRONLY, 0)
		if ferr != nil {
			return nil, ferr
		}
		defer f.Close()
		if _, ferr := f.Write(a.more); ferr != nil {
			return nil, ferr
		}
	}
	return items, err
}

// A large file written on after it was handed out is not stored as it was
// then: reading it fails, it goes back alone, its blob goes, and the file
// is taken whole once it has settled again.
func TestDirectoryFileChangedWhileRead(t *testing.T) {
	s := sqlitetest.Open(t)
	dir := t.TempDir()
	first, more := patterned(3<<20, 5), patterned(1<<20, 6)
	writeFile(t, dir, "late.bin", first)
	top := &courier.Topology{
		Routes:   map[string]*courier.Route{"acme": {Name: "acme", Endpoints: []string{"a"}}},
		Policies: map[string]*courier.Policy{courier.DefaultPolicyName: courier.DefaultPolicy()},
	}
	r := &courier.Receiver{Name: "drop", Transport: courier.ReceiveDir, Type: "invoice", Route: "acme",
		Dir: courier.DirSource{Path: dir, Settle: 50 * time.Millisecond}}
	svc := receiver.New(receiver.Options{Store: s, Receivers: []*courier.Receiver{r}, MaxPayload: 64 << 20,
		TopologyFunc: func() *courier.Topology { return top },
		OpenFunc: func(_ context.Context, r *courier.Receiver) (courier.Source, error) {
			p, err := filetransport.OpenPickup(r)
			return &appendOnFetch{Pickup: p, dir: dir, more: more}, err
		},
		RetryInitial: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond})
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Stop(context.Background()) })
	poll.Until(t, "the file processed", func() bool { return len(processed(t, dir)) == 1 })
	poll.Until(t, "the file counted", func() bool { return svc.Statuses()[0].Received == 1 })
	// Handed back alone, as an item still being written: no failure.
	if st := svc.Statuses()[0]; st.LastError != "" {
		t.Fatalf("last error %q; want none", st.LastError)
	}
	msgs := storedMessages(t, s)
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	want := append(first, more...)
	for _, m := range msgs {
		if got := storetest.ReadPayload(t, s, m); !bytes.Equal(got, want) {
			t.Fatalf("%s of %d bytes; want the whole file's %d", m.ID, len(got), len(want))
		}
	}
	storetest.WantBlobUsage(t, s, 1, int64(len(want)))
}
