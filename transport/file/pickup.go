package file

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/dirsync"
)

// ProcessedDir is the folder under a pick-up directory into which a file is
// moved once its content is stored.
const ProcessedDir = "processed"

// DoneSuffix ends the name of the marker that a writer puts beside a
// complete file when its receive location asks for one.
const DoneSuffix = ".done"

// pickupWait is how long Fetch waits for a first ready file before it
// returns none, and pickupPoll how often it looks meanwhile: often enough to
// take a file soon after it settles, seldom enough that a large directory
// is not listed in a loop.
const (
	pickupWait = time.Second
	pickupPoll = 200 * time.Millisecond
)

// Pickup is a receive location's pick-up directory. It hands out the files
// that are complete, oldest first, and moves each into ProcessedDir when it
// is acknowledged. A file up to courier.InlineMax is handed out read; a
// larger one with Open, to be streamed into the store, never whole in
// memory. Several nodes may share a directory: a file that another node
// moved away meanwhile is simply gone.
type Pickup struct {
	name       string // the receiver's, for errors
	dir        string
	processed  string
	pattern    string
	settle     time.Duration
	doneMarker bool

	mu sync.Mutex
	// seen is what the scans saw of each file: a file counts as settled
	// when its size and modification time have not changed for settle.
	seen map[string]sighting
	// inFlight holds the files handed out and neither acked nor released,
	// so that a later Fetch does not hand them out again.
	inFlight map[string]bool
	closed   bool
}

var _ courier.Source = (*Pickup)(nil)

// sighting is what scans saw of one file, and since when.
type sighting struct {
	size  int64
	mtime time.Time
	since time.Time
}

// pickupHandle is the Handle of an item from a Pickup: the file, and the
// size and modification time of the content that was read.
type pickupHandle struct {
	owner *Pickup
	name  string
	size  int64
	mtime time.Time
}

// errChanged says that a file changed while it was read.
var errChanged = courier.ErrItemChanged

// OpenPickup opens r.Dir for reading. The directory must exist (courier
// does not create it, so a typo does not start an empty pick-up folder);
// its ProcessedDir is created when missing.
func OpenPickup(r *courier.Receiver) (*Pickup, error) {
	if r == nil {
		return nil, errors.New("open pick-up directory: no receiver")
	}
	src := r.Dir
	p := &Pickup{
		name:       r.Name,
		dir:        filepath.Clean(src.Path),
		pattern:    cmp.Or(src.Pattern, "*"),
		settle:     cmp.Or(src.Settle, courier.DefaultSettle),
		doneMarker: src.DoneMarker,
		seen:       make(map[string]sighting),
		inFlight:   make(map[string]bool),
	}
	p.processed = filepath.Join(p.dir, ProcessedDir)
	switch {
	case src.Path == "":
		return nil, fmt.Errorf("receiver %s: the pick-up directory has no path", r.Name)
	case strings.ContainsRune(p.pattern, filepath.Separator):
		return nil, fmt.Errorf("receiver %s: pattern %q: it matches file names, which hold no %q", r.Name, p.pattern, filepath.Separator)
	case src.Settle < 0:
		return nil, fmt.Errorf("receiver %s: settle %s is negative", r.Name, src.Settle)
	}
	if _, err := filepath.Match(p.pattern, ""); err != nil {
		return nil, fmt.Errorf("receiver %s: pattern %q: %w", r.Name, p.pattern, err)
	}
	info, err := os.Stat(p.dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("receiver %s: the pick-up directory %s does not exist (courier does not create it): %w", r.Name, p.dir, err)
	case err != nil:
		return nil, fmt.Errorf("receiver %s: pick-up directory: %w", r.Name, err)
	case !info.IsDir():
		return nil, fmt.Errorf("receiver %s: the pick-up directory %s is not a directory", r.Name, p.dir)
	}
	if err := p.makeProcessed(); err != nil {
		return nil, fmt.Errorf("receiver %s: %w", r.Name, err)
	}
	return p, nil
}

// makeProcessed creates ProcessedDir unless it is there.
func (p *Pickup) makeProcessed() error {
	err := os.Mkdir(p.processed, 0o755)
	if errors.Is(err, fs.ErrExist) {
		info, err := os.Stat(p.processed)
		if err != nil {
			return fmt.Errorf("processed folder: %w", err)
		}
		if !info.IsDir() {
			return fmt.Errorf("processed folder %s is not a directory", p.processed)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("create processed folder: %w", err)
	}
	if err := dirsync.Sync(p.dir); err != nil {
		return fmt.Errorf("create processed folder: sync %s: %w", p.dir, err)
	}
	return nil
}

// Fetch returns up to max complete files (max below 1 counts as 1), the
// oldest first. It waits up to about a second for one and returns none,
// without error, when none is ready by then or ctx ends. A file it cannot
// read is an error only when no other file could be read, so that one bad
// file does not hold up the rest.
func (p *Pickup) Fetch(ctx context.Context, max int) ([]*courier.InboundItem, error) {
	if max < 1 {
		max = 1
	}
	deadline := time.Now().Add(pickupWait)
	for {
		items, err := p.fetchReady(max)
		if err != nil || len(items) > 0 {
			return items, err
		}
		wait := min(pickupPoll, time.Until(deadline))
		if wait <= 0 {
			return nil, nil
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, nil
		case <-timer.C:
		}
	}
}

// fetchReady reads up to max of the files that one scan finds ready.
func (p *Pickup) fetchReady(max int) ([]*courier.InboundItem, error) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("pick-up directory %s: closed", p.dir)
	}
	ready, err := p.scan()
	if err != nil {
		return nil, err
	}
	var items []*courier.InboundItem
	var readErr error
	for _, h := range ready {
		if len(items) == max {
			break
		}
		it := &courier.InboundItem{
			Name:        h.name,
			ContentType: contentType(h.name),
			Headers:     map[string]string{"file-name": h.name},
			Handle:      h,
		}
		var err error
		if h.size <= courier.InlineMax {
			it.Body, err = p.read(h)
		} else {
			// Too large to hold: read as it is stored. Opened once now,
			// so that a file that cannot be read is passed over here as a
			// small one is.
			err = p.check(h)
			it.Open, it.Size = func() (io.ReadCloser, error) { return p.open(h) }, h.size
		}
		switch {
		case errors.Is(err, errChanged):
			// Still being written after all: it settles anew.
			p.mu.Lock()
			delete(p.seen, h.name)
			p.mu.Unlock()
			continue
		case errors.Is(err, fs.ErrNotExist):
			continue // another node took it
		case err != nil:
			readErr = cmp.Or(readErr, err)
			continue
		}
		items = append(items, it)
	}
	if len(items) == 0 {
		return nil, readErr
	}
	p.mu.Lock()
	for _, it := range items {
		p.inFlight[it.Name] = true
	}
	p.mu.Unlock()
	return items, nil
}

// scan lists the directory, records what it saw for the settle test, and
// returns the files ready to be taken, the oldest first (then by name).
func (p *Pickup) scan() ([]*pickupHandle, error) {
	entries, err := os.ReadDir(p.dir)
	if err != nil {
		return nil, fmt.Errorf("list pick-up directory %s: %w", p.dir, err)
	}
	now := time.Now()
	names := make(map[string]bool, len(entries))
	for _, e := range entries {
		names[e.Name()] = true
	}
	var found []*pickupHandle
	var orphans []string
	for _, e := range entries {
		name := e.Name()
		if p.doneMarker && strings.HasSuffix(name, DoneSuffix) && !strings.HasPrefix(name, ".") &&
			e.Type().IsRegular() && !names[strings.TrimSuffix(name, DoneSuffix)] {
			orphans = append(orphans, name)
			continue
		}
		if !p.matches(name) || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue // gone or replaced since the listing
		}
		found = append(found, &pickupHandle{owner: p, name: name, size: info.Size(), mtime: info.ModTime()})
	}
	p.removeOrphans(orphans)

	p.mu.Lock()
	defer p.mu.Unlock()
	var ready []*pickupHandle
	present := make(map[string]bool, len(found))
	for _, h := range found {
		present[h.name] = true
		s, ok := p.seen[h.name]
		if !ok || s.size != h.size || !s.mtime.Equal(h.mtime) {
			s = sighting{size: h.size, mtime: h.mtime, since: now}
			p.seen[h.name] = s
		}
		switch {
		case p.inFlight[h.name]:
		case p.doneMarker:
			if names[h.name+DoneSuffix] {
				ready = append(ready, h)
			}
		case now.Sub(s.since) >= p.settle:
			ready = append(ready, h)
		}
	}
	for name := range p.seen {
		if !present[name] {
			delete(p.seen, name)
		}
	}
	slices.SortFunc(ready, func(a, b *pickupHandle) int {
		return cmp.Or(a.mtime.Compare(b.mtime), strings.Compare(a.name, b.name))
	})
	return ready, nil
}

// removeOrphans removes markers whose file is gone: left by a crash between
// moving a file and removing its marker, such a marker would let the next
// file of that name be taken before it is complete.
func (p *Pickup) removeOrphans(markers []string) {
	for _, m := range markers {
		marker := filepath.Join(p.dir, m)
		// The listing is no snapshot: look again before removing.
		if _, err := os.Lstat(strings.TrimSuffix(marker, DoneSuffix)); errors.Is(err, fs.ErrNotExist) {
			os.Remove(marker) // a failure leaves it for the next scan
		}
	}
}

// matches reports whether a directory entry's name is one to take: not
// hidden (writers' temporary files), not a marker, and matching the
// pattern.
func (p *Pickup) matches(name string) bool {
	if strings.HasPrefix(name, ".") || strings.HasSuffix(name, DoneSuffix) {
		return false
	}
	ok, _ := filepath.Match(p.pattern, name) // the pattern was checked at open
	return ok
}

// read returns the content of h's file, or errChanged when the file is no
// longer what the scan saw: a writer that paused longer than the settle
// time is still at it.
func (p *Pickup) read(h *pickupHandle) ([]byte, error) {
	r, err := p.open(h)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// check opens h's file and lets go of it: a file that cannot be read, or
// that is not a regular file, shows before it is handed out.
func (p *Pickup) check(h *pickupHandle) error {
	r, err := p.open(h)
	if err != nil {
		return err
	}
	return r.Close()
}

// open returns a reader of h's file that ends with errChanged, instead of
// io.EOF, when the file is no longer what the scan saw.
func (p *Pickup) open(h *pickupHandle) (io.ReadCloser, error) {
	path := filepath.Join(p.dir, h.name)
	// O_NONBLOCK: a FIFO put there meanwhile must not block the reader.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	opened, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if !opened.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("read %s: %w", path, errChanged)
	}
	// One byte more than expected is enough to see that it grew.
	return &pickupReader{f: f, r: io.LimitReader(f, h.size+1), h: h, path: path, opened: opened}, nil
}

// pickupReader reads a picked-up file and, at its end, checks that it is
// still the file the scan saw, of the size and modification time seen.
type pickupReader struct {
	f      *os.File
	r      io.Reader
	h      *pickupHandle
	path   string
	opened os.FileInfo
	n      int64
}

func (r *pickupReader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	r.n += int64(n)
	if r.n > r.h.size {
		return n, fmt.Errorf("read %s: %w", r.path, errChanged)
	}
	if err == io.EOF {
		if cerr := r.check(); cerr != nil {
			return n, cerr
		}
	} else if err != nil {
		err = fmt.Errorf("read %s: %w", r.path, err)
	}
	return n, err
}

// check tells whether the file read whole is the one the scan saw.
func (r *pickupReader) check() error {
	now, err := os.Lstat(r.path)
	if err != nil {
		return fmt.Errorf("read %s: %w", r.path, err)
	}
	if r.n != r.h.size || now.Size() != r.h.size || !now.ModTime().Equal(r.h.mtime) || !os.SameFile(r.opened, now) {
		return fmt.Errorf("read %s: %w", r.path, errChanged)
	}
	return nil
}

func (r *pickupReader) Close() error { return r.f.Close() }

// contentType tells a file's content type by its extension.
func contentType(name string) string {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".json":
		return "application/json"
	case ".xml":
		return "application/xml"
	case ".txt":
		return "text/plain; charset=utf-8"
	case ".csv":
		return "text/csv"
	case ".pdf":
		return "application/pdf"
	}
	return "application/octet-stream"
}

// handles returns the items' handles, or an error when one did not come
// from p.
func (p *Pickup) handles(items []*courier.InboundItem) ([]*pickupHandle, error) {
	hs := make([]*pickupHandle, 0, len(items))
	for _, it := range items {
		var h *pickupHandle
		if it != nil {
			h, _ = it.Handle.(*pickupHandle)
		}
		if h == nil || h.owner != p {
			return nil, fmt.Errorf("pick-up directory %s: an item was not fetched from it", p.dir)
		}
		hs = append(hs, h)
	}
	return hs, nil
}

// Ack moves the items' files into ProcessedDir, removes their markers, and
// makes both directories durable once for the batch. A file already gone
// (another node took it) is no error. A file that is no longer the content
// that was read (a new one under the same name) stays, to be fetched on its
// own. The items are forgotten even when moving one fails: fetched again,
// it is stored again as the same message, and moved then.
func (p *Pickup) Ack(ctx context.Context, items []*courier.InboundItem) error {
	hs, err := p.handles(items)
	if err != nil {
		return err
	}
	defer p.forget(hs, true)
	var errs []error
	moved := false
	for _, h := range hs {
		did, err := p.moveToProcessed(h)
		if err != nil {
			errs = append(errs, err)
		}
		moved = moved || did
	}
	if moved {
		for _, dir := range []string{p.processed, p.dir} {
			if err := dirsync.Sync(dir); err != nil {
				errs = append(errs, fmt.Errorf("sync %s: %w", dir, err))
			}
		}
	}
	return errors.Join(errs...)
}

// moveToProcessed moves h's file into ProcessedDir, under a new name when
// one of its name is there already; moved is false when there was nothing
// to move.
func (p *Pickup) moveToProcessed(h *pickupHandle) (moved bool, err error) {
	src := filepath.Join(p.dir, h.name)
	info, err := os.Lstat(src)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("move %s: %w", src, err)
	case !info.Mode().IsRegular() || info.Size() != h.size || !info.ModTime().Equal(h.mtime):
		return false, nil
	}
	for try := 0; ; try++ {
		dst, err := p.freeName(h.name)
		if err != nil {
			return false, fmt.Errorf("move %s: %w", src, err)
		}
		// Between the look for a free name and the rename, a file of the same
		// name could arrive from another node and be replaced: both nodes
		// would have to move two files of one name at the same instant.
		err = os.Rename(src, dst)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("move %s to %s: %w", src, dst, err)
		}
		if _, serr := os.Lstat(src); errors.Is(serr, fs.ErrNotExist) {
			return false, nil // another node took it
		}
		// The processed folder is gone: make it again, once.
		if try > 0 {
			return false, fmt.Errorf("move %s to %s: %w", src, dst, err)
		}
		if err := p.makeProcessed(); err != nil {
			return false, fmt.Errorf("move %s: %w", src, err)
		}
	}
	if p.doneMarker {
		if err := os.Remove(src + DoneSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return true, fmt.Errorf("remove marker of %s: %w", src, err)
		}
	}
	return true, nil
}

// freeName returns a path in ProcessedDir for a file called name, with a
// suffix when a file of that name is there: a file moved there is never
// overwritten.
func (p *Pickup) freeName(name string) (string, error) {
	dst := filepath.Join(p.processed, name)
	for range 100 {
		_, err := os.Lstat(dst)
		if errors.Is(err, fs.ErrNotExist) {
			return dst, nil
		}
		if err != nil {
			return "", err
		}
		dst = filepath.Join(p.processed, fmt.Sprintf("%s.%d", name, time.Now().UnixNano()))
	}
	return "", fmt.Errorf("no free name for %s in %s", name, p.processed)
}

// Release hands the items back: their files stay where they are and are
// fetched again.
func (p *Pickup) Release(ctx context.Context, items []*courier.InboundItem) error {
	hs, err := p.handles(items)
	if err != nil {
		return err
	}
	p.forget(hs, false)
	return nil
}

// forget removes files from the in-flight set; acked ones lose their
// sighting too, so that a new file of that name settles from the start.
func (p *Pickup) forget(hs []*pickupHandle, acked bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, h := range hs {
		delete(p.inFlight, h.name)
		if acked {
			delete(p.seen, h.name)
		}
	}
}

// Pending counts the matching files in the directory, complete or not,
// except those fetched and not yet acked or released.
func (p *Pickup) Pending(ctx context.Context) (int64, error) {
	entries, err := os.ReadDir(p.dir)
	if err != nil {
		return -1, fmt.Errorf("list pick-up directory %s: %w", p.dir, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for _, e := range entries {
		if e.Type().IsRegular() && p.matches(e.Name()) && !p.inFlight[e.Name()] {
			n++
		}
	}
	return n, nil
}

// Close ends fetching; the files stay where they are. Closing twice is
// harmless.
func (p *Pickup) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	clear(p.inFlight)
	return nil
}
