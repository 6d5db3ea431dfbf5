// Package file delivers messages as files in a directory: the pick-up folder
// of a VANS agent, an EDI translator or a batch job. Each file appears whole
// or not at all (written to a hidden temporary file, synced, linked into
// place, and the directory synced), and an existing file is never
// overwritten: one with the same bytes counts as delivered, so a repeated
// attempt is harmless. A payload kept as a blob streams from the store
// into the file.
//
// Callers import it under an alias (filetransport
// "github.com/courier-gw/courier/transport/file").
package file

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/dirsync"
	"github.com/courier-gw/courier/internal/sendopts"
)

// DefaultMode is the permission of the files written (before the umask):
// readable by the pick-up process, which often runs as another user.
const DefaultMode fs.FileMode = 0o644

// TimeLayout is how {time} is written in a file name: the message's
// creation time in UTC, sortable and free of characters that file systems
// refuse.
const TimeLayout = "20060102T150405Z"

// TempPrefix and TempSuffix frame the names of the temporary files: hidden,
// and ending in a suffix that no pick-up pattern such as *.xml matches.
const (
	TempPrefix = ".courier-"
	TempSuffix = ".tmp"
)

// Options configure a Transport. Every field has a default.
type Options struct {
	Logger *slog.Logger
	Clock  courier.Clock // the time of a message without a creation time
	Mode   fs.FileMode   // permission of new files; DefaultMode when zero
}

// Transport writes deliveries into the directories of file endpoints. It
// holds no state between attempts and is safe for concurrent use.
type Transport struct {
	opts Options
}

var _ courier.Sender = (*Transport)(nil)

// New returns a Transport with o's unset fields at their defaults.
func New(o Options) *Transport {
	sendopts.Common{Logger: &o.Logger, Clock: &o.Clock}.SetDefaults()
	if o.Mode == 0 {
		o.Mode = DefaultMode
	}
	return &Transport{opts: o}
}

// Close releases nothing: it is there so that every transport stops alike.
func (t *Transport) Close() {}

// Send writes d.Message's payload to the file its endpoint's name template
// gives. It never returns an error: every failure is a Result with a class.
func (t *Transport) Send(ctx context.Context, d courier.Delivery) courier.Result {
	if fail := sendopts.Unsendable(d); fail != nil {
		return *fail
	}
	m, e := d.Message, d.Endpoint
	if err := ctx.Err(); err != nil {
		return courier.Result{Class: courier.ClassTransport, Error: "attempt canceled before the file was written"}
	}
	name, err := FileName(settingsOf(e).Name, m, t.opts.Clock.Now())
	if err != nil {
		return courier.Result{Class: courier.ClassRejected, Error: err.Error()}
	}
	dir := settingsOf(e).Dir
	path := filepath.Join(dir, name)
	c := content{ctx: ctx, d: d}
	written, err := t.write(dir, path, c)
	if err != nil {
		var perr *payloadError
		if errors.As(err, &perr) {
			// The store's fault, not the directory's: transient, and
			// nothing was put in place.
			return courier.Result{Class: courier.ClassTransport, Error: perr.Error()}
		}
		class, msg := classify(err, path)
		return courier.Result{Class: class, Error: msg}
	}
	if !written {
		t.opts.Logger.Debug("file transport: the file is there already with the same content", "endpoint", e.Name, "message", m.ID, "file", path)
		return courier.Result{Response: fmt.Sprintf("%s was there already with the same %d bytes", name, c.size())}
	}
	return courier.Result{Response: fmt.Sprintf("wrote %s (%d bytes)", name, c.size())}
}

// content is what a delivery's file holds: the payload in memory, or its
// blob, which is streamed from the store and never held whole.
type content struct {
	ctx context.Context
	d   courier.Delivery
}

func (c content) blob() bool { return c.d.Message.HasBlob() }

// size is the payload's length.
func (c content) size() int64 {
	if c.blob() {
		return int64(c.d.Message.Size)
	}
	return int64(len(c.d.Message.Payload))
}

// copyTo writes the blob to w and checks that it has the size stored; a
// failure to read it is a *payloadError.
func (c content) copyTo(w io.Writer) error {
	r, err := c.d.OpenPayload(c.ctx)
	if err != nil {
		return &payloadError{err: err}
	}
	defer r.Close()
	// w's own error tells a failed write from a failed read.
	cw := &errWriter{w: w}
	n, err := io.Copy(cw, io.LimitReader(r, c.size()+1))
	switch {
	case err != nil && cw.err == nil:
		return &payloadError{err: err}
	case err != nil:
		return err
	case n != c.size():
		return &payloadError{err: fmt.Errorf("the blob has %d bytes, not the %d stored", n, c.size())}
	}
	return nil
}

// errWriter passes writes to w and keeps the error w returned.
type errWriter struct {
	w   io.Writer
	err error
}

func (c *errWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if err != nil {
		c.err = err
	}
	return n, err
}

// payloadError is a failure to read the payload from the store.
type payloadError struct{ err error }

func (e *payloadError) Error() string {
	return "cannot read the payload from the store: " + e.err.Error()
}

func (e *payloadError) Unwrap() error { return e.err }

// FileName expands a name template: {id} is the message id, {type} its type
// and {time} its creation time in TimeLayout (now for a message without
// one). The creation time, not the attempt's, so that every attempt of a
// message aims at the same file. An empty template means "{id}".
func FileName(template string, m *courier.Message, now time.Time) (string, error) {
	if template == "" {
		template = "{id}"
	}
	at := m.CreatedAt
	if at.IsZero() {
		at = now
	}
	name := strings.NewReplacer("{id}", m.ID, "{type}", m.Type, "{time}", at.UTC().Format(TimeLayout)).Replace(template)
	switch {
	case name == "" || name == "." || name == "..":
		return "", fmt.Errorf("file name %q from the template %q is not a file name", name, template)
	case strings.ContainsAny(name, "/\\\x00"):
		return "", fmt.Errorf("file name %q from the template %q leaves the directory", name, template)
	case strings.HasPrefix(name, TempPrefix) && strings.HasSuffix(name, TempSuffix):
		return "", fmt.Errorf("file name %q looks like one of courier's temporary files", name)
	}
	return name, nil
}

// existsError says that the target file holds other bytes than the message.
// size is that file's, or -1 when it is no regular file.
type existsError struct{ size int64 }

func (e *existsError) Error() string { return "exists with other content" }

// write puts c at path unless a file is there already. written is false
// when that file holds the same bytes (an earlier attempt, or the same
// message twice); another file there is an *existsError.
func (t *Transport) write(dir, path string, c content) (written bool, err error) {
	if err := compare(path, c); !errors.Is(err, fs.ErrNotExist) {
		return false, err // nil when the same bytes are there already
	}

	tmp, err := t.writeTemp(dir, c)
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp) // after a link, only the temporary name goes

	// A hard link puts the file in place atomically and, unlike rename,
	// refuses to replace one that appeared meanwhile.
	err = os.Link(tmp, path)
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrExist):
		return false, compare(path, c)
	case linkUnsupported(err):
		// Some shares (SMB, some FUSE file systems) have no hard links:
		// rename is atomic there too, with a short window in which a file
		// made by someone else in between would be replaced.
		if _, serr := os.Lstat(path); serr == nil {
			return false, compare(path, c)
		}
		if err := os.Rename(tmp, path); err != nil {
			return false, err
		}
	default:
		return false, err
	}
	if err := dirsync.Sync(dir); err != nil {
		return false, err
	}
	return true, nil
}

// writeTemp writes c to a new hidden file in dir and syncs it, so that the
// name it later gets points at complete data even after a crash.
func (t *Transport) writeTemp(dir string, c content) (string, error) {
	var f *os.File
	for try := 0; ; try++ {
		var rnd [8]byte
		rand.Read(rnd[:])
		name := filepath.Join(dir, TempPrefix+hex.EncodeToString(rnd[:])+TempSuffix)
		var err error
		f, err = os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, t.opts.Mode)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) || try == 10 {
			return "", err
		}
	}
	var err error
	if c.blob() {
		err = c.copyTo(f)
	} else {
		_, err = f.Write(c.d.Message.Payload)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// compare judges the file at path against c: nil when it holds the same
// bytes, an *existsError when anything else is there, and an error that
// matches fs.ErrNotExist when nothing is. Anything there but a regular file
// (a directory, a symbolic link, a FIFO that would block a reader) is not
// the same and is not opened. A blob is compared by its SHA-256, streamed
// over the file, so that neither is read into memory.
func compare(path string, c content) error {
	info, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return &existsError{size: -1}
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err = f.Stat()
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return &existsError{size: -1}
	}
	if info.Size() != c.size() {
		return &existsError{size: info.Size()}
	}
	if c.blob() {
		return compareDigest(f, c)
	}
	payload := c.d.Message.Payload
	got, err := io.ReadAll(io.LimitReader(f, int64(len(payload))+1))
	if err != nil {
		return err
	}
	if !bytes.Equal(got, payload) {
		return &existsError{size: int64(len(got))}
	}
	return nil
}

// compareDigest compares the file f, of the blob's size, with the blob c:
// by the SHA-256 the message carries, or where it carries none by reading
// the blob alongside.
func compareDigest(f *os.File, c content) error {
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return err
	}
	if want := c.d.Message.Digest; want != "" {
		if hex.EncodeToString(h.Sum(nil)) != want {
			return &existsError{size: n}
		}
		return nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	same := &sameWriter{r: f}
	if err := c.copyTo(same); err != nil {
		if same.differ {
			return &existsError{size: n}
		}
		return err
	}
	return nil
}

// sameWriter checks that what is written to it is what r reads next.
type sameWriter struct {
	r      io.Reader
	buf    []byte
	differ bool
}

// errDiffer stops a comparison at the first difference.
var errDiffer = errors.New("the contents differ")

func (s *sameWriter) Write(p []byte) (int, error) {
	if cap(s.buf) < len(p) {
		s.buf = make([]byte, len(p))
	}
	buf := s.buf[:len(p)]
	if _, err := io.ReadFull(s.r, buf); err != nil || !bytes.Equal(buf, p) {
		s.differ = true
		return 0, errDiffer
	}
	return len(p), nil
}

// linkUnsupported reports whether err says that the file system has no
// hard links.
func linkUnsupported(err error) bool {
	// EPERM is how FAT and some FUSE file systems say it; where it means a
	// real refusal, the rename that follows meets it again.
	return errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ENOTSUP) ||
		errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EXDEV)
}
