package file_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/courier-gw/courier"
	filetransport "github.com/courier-gw/courier/transport/file"
)

// testSettle is short, so that tests do not wait long for files to settle.
const testSettle = 50 * time.Millisecond

// mustOpenPickup opens a pick-up directory on dir with a short settle time,
// after edit has changed its source, and closes it at the test's end.
func mustOpenPickup(t *testing.T, dir string, edit func(*courier.DirSource)) *filetransport.Pickup {
	t.Helper()
	r := &courier.Receiver{Name: "in", Transport: courier.ReceiveDir,
		Dir: courier.DirSource{Path: dir, Settle: testSettle}}
	if edit != nil {
		edit(&r.Dir)
	}
	p, err := filetransport.OpenPickup(r)
	if err != nil {
		t.Fatalf("OpenPickup: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// dropFile writes a whole file into dir.
func dropFile(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fetchAtLeast fetches until n items came, checking that no Fetch returns
// more than max, and fails when they do not come.
func fetchAtLeast(t *testing.T, p *filetransport.Pickup, max, n int) []*courier.InboundItem {
	t.Helper()
	var got []*courier.InboundItem
	for deadline := time.Now().Add(15 * time.Second); len(got) < n; {
		if time.Now().After(deadline) {
			t.Fatalf("fetched %d items (%v), want %d", len(got), itemNames(got), n)
		}
		items, err := p.Fetch(context.Background(), max)
		if err != nil {
			t.Fatalf("Fetch: %v", err)
		}
		if len(items) > max {
			t.Fatalf("Fetch(%d) returned %d items", max, len(items))
		}
		got = append(got, items...)
	}
	return got
}

// fetchNone checks that a Fetch returns nothing.
func fetchNone(t *testing.T, p *filetransport.Pickup) {
	t.Helper()
	items, err := p.Fetch(context.Background(), 100)
	if err != nil || len(items) != 0 {
		t.Fatalf("Fetch = %v, %v; want nothing", itemNames(items), err)
	}
}

func itemNames(items []*courier.InboundItem) []string {
	var names []string
	for _, it := range items {
		names = append(names, it.Name)
	}
	return names
}

// dirNames lists the names in dir, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func mustAck(t *testing.T, p *filetransport.Pickup, items []*courier.InboundItem) {
	t.Helper()
	if err := p.Ack(context.Background(), items); err != nil {
		t.Fatalf("Ack: %v", err)
	}
}

func mustPending(t *testing.T, p *filetransport.Pickup, want int64) {
	t.Helper()
	if got, err := p.Pending(context.Background()); got != want || err != nil {
		t.Errorf("Pending = %d, %v; want %d", got, err, want)
	}
}

func TestPickupTakesWholeFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := mustOpenPickup(t, dir, nil)
	if got := dirNames(t, dir); !slices.Equal(got, []string{filetransport.ProcessedDir}) {
		t.Fatalf("after open the directory holds %v, want the processed folder", got)
	}
	tests := []struct {
		name, want string
	}{
		{"order.json", "application/json"},
		{"invoice.xml", "application/xml"},
		{"note.txt", "text/plain; charset=utf-8"},
		{"lines.csv", "text/csv"},
		{"scan.pdf", "application/pdf"},
		{"SHOUT.JSON", "application/json"},
		{"blob.bin", "application/octet-stream"},
		{"no-extension", "application/octet-stream"},
	}
	for _, tc := range tests {
		dropFile(t, dir, tc.name, "content of "+tc.name)
	}
	mustPending(t, p, int64(len(tests)))

	items := fetchAtLeast(t, p, 100, len(tests))
	if len(items) != len(tests) {
		t.Fatalf("fetched %v, want each of the %d files once", itemNames(items), len(tests))
	}
	byName := map[string]*courier.InboundItem{}
	for _, it := range items {
		byName[it.Name] = it
	}
	for _, tc := range tests {
		it := byName[tc.name]
		if it == nil {
			t.Errorf("%s was not fetched", tc.name)
			continue
		}
		if got, want := string(it.Body), "content of "+tc.name; got != want {
			t.Errorf("%s: body %q, want %q", tc.name, got, want)
		}
		if it.ContentType != tc.want {
			t.Errorf("%s: content type %q, want %q", tc.name, it.ContentType, tc.want)
		}
		if got := it.Headers["file-name"]; got != tc.name {
			t.Errorf("%s: header file-name %q", tc.name, got)
		}
	}
	mustPending(t, p, 0) // all in flight

	mustAck(t, p, items)
	if got := dirNames(t, dir); !slices.Equal(got, []string{filetransport.ProcessedDir}) {
		t.Errorf("after the ack the directory holds %v, want only the processed folder", got)
	}
	for _, tc := range tests {
		got, err := os.ReadFile(filepath.Join(dir, filetransport.ProcessedDir, tc.name))
		if err != nil || string(got) != "content of "+tc.name {
			t.Errorf("processed/%s: %q, %v", tc.name, got, err)
		}
	}
	mustPending(t, p, 0)
	fetchNone(t, p)
}

// TestPickupOldestFirst fetches by modification time, then by name.
func TestPickupOldestFirst(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base := time.Now().Add(-24 * time.Hour)
	for _, f := range []struct {
		name string
		age  time.Duration
	}{
		{"a", 1 * time.Hour},
		{"b", 3 * time.Hour},
		{"c", 2 * time.Hour},
		{"e", 4 * time.Hour},
		{"d", 4 * time.Hour},
	} {
		dropFile(t, dir, f.name, f.name)
		at := base.Add(-f.age)
		if err := os.Chtimes(filepath.Join(dir, f.name), at, at); err != nil {
			t.Fatal(err)
		}
	}
	p := mustOpenPickup(t, dir, nil)
	items := fetchAtLeast(t, p, 100, 5)
	if got, want := itemNames(items), []string{"d", "e", "b", "c", "a"}; !slices.Equal(got, want) {
		t.Errorf("fetched %v, want %v", got, want)
	}
}

// TestPickupNeverTakesHalfAFile appends to a file in small steps: when the
// file is taken, it is whole.
func TestPickupNeverTakesHalfAFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// The settle time is many times the writer's pause between chunks.
	p := mustOpenPickup(t, dir, func(s *courier.DirSource) { s.Settle = 300 * time.Millisecond })

	const chunks = 50
	var final bytes.Buffer
	for i := range chunks {
		fmt.Fprintf(&final, "chunk %02d of %d\n", i, chunks)
	}
	f, err := os.Create(filepath.Join(dir, "growing.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		defer f.Close()
		for line := range strings.Lines(final.String()) {
			if _, err := f.WriteString(line); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	defer wg.Wait()

	for deadline := time.Now().Add(20 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatal("the file was never taken")
		}
		items, err := p.Fetch(context.Background(), 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(items) == 0 {
			continue
		}
		if len(items) != 1 || items[0].Name != "growing.txt" {
			t.Fatalf("fetched %v", itemNames(items))
		}
		if !bytes.Equal(items[0].Body, final.Bytes()) {
			t.Fatalf("took the file with %d of its %d bytes", len(items[0].Body), final.Len())
		}
		mustAck(t, p, items)
		break
	}
	if _, err := os.Stat(filepath.Join(dir, filetransport.ProcessedDir, "growing.txt")); err != nil {
		t.Errorf("not in processed: %v", err)
	}
}

func TestPickupDoneMarker(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := mustOpenPickup(t, dir, func(s *courier.DirSource) { s.DoneMarker = true })
	dropFile(t, dir, "a.xml", "<a/>")
	// A marker whose file is gone (a crash after the move) is cleared, so
	// that it cannot vouch for the next file of that name.
	dropFile(t, dir, "gone.xml.done", "")

	fetchNone(t, p)
	mustPending(t, p, 1)
	if _, err := os.Stat(filepath.Join(dir, "gone.xml.done")); !os.IsNotExist(err) {
		t.Errorf("the orphan marker is still there: %v", err)
	}

	dropFile(t, dir, "a.xml.done", "")
	items := fetchAtLeast(t, p, 10, 1)
	if got := itemNames(items); !slices.Equal(got, []string{"a.xml"}) || string(items[0].Body) != "<a/>" {
		t.Fatalf("fetched %v", got)
	}
	mustAck(t, p, items)
	if got := dirNames(t, dir); !slices.Equal(got, []string{filetransport.ProcessedDir}) {
		t.Errorf("after the ack the directory holds %v, want neither file nor marker", got)
	}
	if got := dirNames(t, filepath.Join(dir, filetransport.ProcessedDir)); !slices.Equal(got, []string{"a.xml"}) {
		t.Errorf("processed holds %v", got)
	}
}

func TestPickupAck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	processed := filepath.Join(dir, filetransport.ProcessedDir)
	if err := os.Mkdir(processed, 0o755); err != nil {
		t.Fatal(err)
	}
	dropFile(t, processed, "a.txt", "old")
	p := mustOpenPickup(t, dir, nil)

	// A name taken in processed/ keeps both files, also a second time.
	for _, body := range []string{"new", "newer"} {
		dropFile(t, dir, "a.txt", body)
		mustAck(t, p, fetchAtLeast(t, p, 10, 1))
	}
	var bodies []string
	suffixed := regexp.MustCompile(`^a\.txt\.[0-9]+$`)
	for _, name := range dirNames(t, processed) {
		if name != "a.txt" && !suffixed.MatchString(name) {
			t.Errorf("processed holds %s", name)
		}
		b, _ := os.ReadFile(filepath.Join(processed, name))
		bodies = append(bodies, string(b))
	}
	slices.Sort(bodies)
	if want := []string{"new", "newer", "old"}; !slices.Equal(bodies, want) {
		t.Errorf("processed holds %v, want %v", bodies, want)
	}

	// A file that vanished before the ack (another node took it) is no
	// error.
	dropFile(t, dir, "b.txt", "b")
	items := fetchAtLeast(t, p, 10, 1)
	if err := os.Remove(filepath.Join(dir, "b.txt")); err != nil {
		t.Fatal(err)
	}
	mustAck(t, p, items)

	// A file replaced after it was read is not what was stored: it stays,
	// and is fetched with its new content.
	dropFile(t, dir, "c.txt", "first")
	items = fetchAtLeast(t, p, 10, 1)
	dropFile(t, dir, "c.txt", "second, longer")
	mustAck(t, p, items)
	items = fetchAtLeast(t, p, 10, 1)
	if items[0].Name != "c.txt" || string(items[0].Body) != "second, longer" {
		t.Errorf("fetched %s %q, want the new c.txt", items[0].Name, items[0].Body)
	}
	mustAck(t, p, items)
	if got, _ := os.ReadFile(filepath.Join(processed, "c.txt")); string(got) != "second, longer" {
		t.Errorf("processed/c.txt holds %q", got)
	}

	// Items of another pick-up directory are refused.
	other := mustOpenPickup(t, t.TempDir(), nil)
	if err := other.Ack(context.Background(), items); err == nil {
		t.Error("Ack took an item of another pick-up directory")
	}
}

// TestPickupInFlight hands out a fetched file once until it is released.
func TestPickupInFlight(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := mustOpenPickup(t, dir, nil)
	dropFile(t, dir, "a", "a")
	dropFile(t, dir, "b", "b")
	items := fetchAtLeast(t, p, 10, 2)
	if len(items) != 2 {
		t.Fatalf("fetched %v", itemNames(items))
	}
	fetchNone(t, p)
	mustPending(t, p, 0)

	var a, b *courier.InboundItem
	for _, it := range items {
		switch it.Name {
		case "a":
			a = it
		case "b":
			b = it
		}
	}
	if err := p.Release(context.Background(), []*courier.InboundItem{a}); err != nil {
		t.Fatal(err)
	}
	mustPending(t, p, 1)
	again := fetchAtLeast(t, p, 10, 1)
	if got := itemNames(again); !slices.Equal(got, []string{"a"}) || string(again[0].Body) != "a" {
		t.Fatalf("after the release fetched %v, want a", got)
	}
	fetchNone(t, p)
	mustAck(t, p, []*courier.InboundItem{again[0], b})
	mustPending(t, p, 0)
	fetchNone(t, p)
}

func TestPickupPattern(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		pattern string
		want    []string
	}{
		{"default", "", []string{"a.xml", "b.json", "c.XML"}},
		{"extension", "*.xml", []string{"a.xml"}},
		{"prefix", "b*", []string{"b.json"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for _, name := range []string{"a.xml", "b.json", "c.XML", ".hidden.xml", ".courier-1.tmp", "x.xml.done", "z.done"} {
				dropFile(t, dir, name, name)
			}
			if err := os.Mkdir(filepath.Join(dir, "sub.xml"), 0o755); err != nil {
				t.Fatal(err)
			}
			dropFile(t, filepath.Join(dir, "sub.xml"), "inner.xml", "inner")
			if err := os.Symlink(filepath.Join(dir, "a.xml"), filepath.Join(dir, "link.xml")); err != nil {
				t.Fatal(err)
			}
			p := mustOpenPickup(t, dir, func(s *courier.DirSource) { s.Pattern = tc.pattern })
			mustPending(t, p, int64(len(tc.want)))
			items := fetchAtLeast(t, p, 100, len(tc.want))
			fetchNone(t, p)
			got := itemNames(items)
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("fetched %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOpenPickupRefuses(t *testing.T) {
	t.Parallel()
	aFile := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(aFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	processedFile := t.TempDir()
	dropFile(t, processedFile, filetransport.ProcessedDir, "")
	missing := filepath.Join(t.TempDir(), "missing")
	tests := []struct {
		name string
		src  courier.DirSource
		want string
	}{
		{"missing directory", courier.DirSource{Path: missing}, "does not exist"},
		{"not a directory", courier.DirSource{Path: aFile}, "is not a directory"},
		{"no path", courier.DirSource{}, "no path"},
		{"bad pattern", courier.DirSource{Path: t.TempDir(), Pattern: "[a"}, "pattern"},
		{"pattern with a separator", courier.DirSource{Path: t.TempDir(), Pattern: "in/*.xml"}, "pattern"},
		{"negative settle", courier.DirSource{Path: t.TempDir(), Settle: -time.Second}, "negative"},
		{"processed is a file", courier.DirSource{Path: processedFile}, "not a directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := filetransport.OpenPickup(&courier.Receiver{Name: "in", Transport: courier.ReceiveDir, Dir: tc.src})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("OpenPickup = %v, want an error saying %q", err, tc.want)
			}
		})
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("the missing directory was created: %v", err)
	}
}

func TestPickupClose(t *testing.T) {
	t.Parallel()
	p := mustOpenPickup(t, t.TempDir(), nil)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := p.Fetch(context.Background(), 1); err == nil {
		t.Error("Fetch after Close gave no error")
	}
}

// TestPickupManyFiles takes 500 files in batches: every Fetch keeps to its
// limit and every file arrives exactly once.
func TestPickupManyFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const files, batch = 500, 37
	for i := range files {
		name := fmt.Sprintf("f%03d.dat", i)
		dropFile(t, dir, name, "body of "+name)
	}
	p := mustOpenPickup(t, dir, nil)
	mustPending(t, p, files)

	seen := map[string]int{}
	for deadline := time.Now().Add(30 * time.Second); len(seen) < files; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d files arrived", len(seen), files)
		}
		items, err := p.Fetch(context.Background(), batch)
		if err != nil {
			t.Fatal(err)
		}
		if len(items) > batch {
			t.Fatalf("Fetch(%d) returned %d items", batch, len(items))
		}
		for _, it := range items {
			seen[it.Name]++
			if string(it.Body) != "body of "+it.Name {
				t.Errorf("%s holds %q", it.Name, it.Body)
			}
		}
		mustAck(t, p, items)
	}
	fetchNone(t, p)
	for name, n := range seen {
		if n != 1 {
			t.Errorf("%s arrived %d times", name, n)
		}
	}
	if got := len(dirNames(t, filepath.Join(dir, filetransport.ProcessedDir))); got != files {
		t.Errorf("processed holds %d files, want %d", got, files)
	}
	mustPending(t, p, 0)
}

// readItem reads an item handed out with Open.
func readItem(it *courier.InboundItem) ([]byte, error) {
	r, err := it.Open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// A file over courier.InlineMax is handed out to be read, not read: Open
// reads it as it was when it settled, and fails once it is no longer that
// file. A file up to InlineMax comes read, as ever.
func TestPickupLargeFileIsOpened(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := mustOpenPickup(t, dir, nil)
	large := bytes.Repeat([]byte("0123456789abcdef"), courier.InlineMax/16+1)
	small := strings.Repeat("x", courier.InlineMax)
	dropFile(t, dir, "large.bin", string(large))
	dropFile(t, dir, "small.bin", small)
	items := fetchAtLeast(t, p, 10, 2)
	byName := map[string]*courier.InboundItem{}
	for _, it := range items {
		byName[it.Name] = it
	}
	if it := byName["small.bin"]; it == nil || it.Open != nil || string(it.Body) != small {
		t.Fatalf("small.bin: %+v; want it read", it)
	}
	it := byName["large.bin"]
	if it == nil || it.Body != nil || it.Open == nil || it.Size != int64(len(large)) || it.ContentSize() != int64(len(large)) {
		t.Fatalf("large.bin: %+v; want it to be opened, of %d bytes", it, len(large))
	}
	for range 2 { // read again when the store failed the first time
		got, err := readItem(it)
		if err != nil || !bytes.Equal(got, large) {
			t.Fatalf("read %d bytes, %v; want the %d of the file", len(got), err, len(large))
		}
	}

	// Written on after it settled: the reader says so rather than hand
	// out other content under the item.
	f, err := os.OpenFile(filepath.Join(dir, "large.bin"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("more"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := readItem(it); err == nil || !strings.Contains(err.Error(), "changed while read") {
		t.Fatalf("reading a file that grew: %v", err)
	}
	os.Remove(filepath.Join(dir, "large.bin"))
	if _, err := readItem(it); err == nil {
		t.Fatal("a file that is gone was read")
	}
	mustAck(t, p, items)
}
