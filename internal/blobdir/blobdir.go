// Package blobdir keeps courier's blobs (payloads over courier.InlineMax) as
// files in a directory: next to a SQLite database, or a directory that the
// nodes of a PostgreSQL store share.
//
// A blob is written to "<ref>.part" and renamed to "<ref>" when committed.
// Its writer holds an exclusive flock on the file from creation until Close,
// which is after the message referring to it is stored; a sweep removes
// only files whose lock it gets and that no message refers to. A process
// that dies lets go of its locks, so what its uploads left behind (a part
// file, or a committed file whose message was never stored) is removed by
// the next sweep, on any node.
package blobdir

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/dirsync"
)

const partSuffix = ".part"

// sweepBatch is how many blobs a sweep asks the store about at once.
const sweepBatch = 500

// Dir is a blob area in a directory. It implements courier.Blobs.
type Dir struct {
	path string
}

var _ courier.Blobs = (*Dir)(nil)

// Open returns the blob area in path, creating the directory if needed.
func Open(path string) (*Dir, error) {
	if err := os.MkdirAll(path, 0o750); err != nil {
		return nil, fmt.Errorf("create the blob directory: %w", err)
	}
	return &Dir{path: path}, nil
}

// Path is the directory.
func (d *Dir) Path() string { return d.path }

// validRef reports whether ref can name a blob of this area: hex only, so
// that no ref reaches outside the directory.
func validRef(ref string) bool {
	if len(ref) != 32 {
		return false
	}
	_, err := hex.DecodeString(ref)
	return err == nil
}

// Create starts a new blob.
func (d *Dir) Create(ctx context.Context) (courier.BlobWriter, error) {
	for {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		ref := hex.EncodeToString(b[:])
		part := filepath.Join(d.path, ref+partSuffix)
		f, err := os.OpenFile(part, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, courier.Errorf(courier.CodeUnavailable, "create a blob: %v", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			os.Remove(part)
			return nil, courier.Errorf(courier.CodeUnavailable, "lock a blob: %v", err)
		}
		// A sweep may have taken the file between its creation and the
		// lock (it removes part files it can lock): then start anew.
		var st syscall.Stat_t
		if err := syscall.Fstat(int(f.Fd()), &st); err != nil || st.Nlink == 0 {
			f.Close()
			continue
		}
		return &writer{dir: d, ref: ref, f: f, buf: bufio.NewWriterSize(f, 256<<10)}, nil
	}
}

type writer struct {
	dir       *Dir
	ref       string
	f         *os.File
	buf       *bufio.Writer
	committed bool
	removed   bool
}

func (w *writer) Write(p []byte) (int, error) {
	n, err := w.buf.Write(p)
	if err != nil {
		return n, courier.Errorf(courier.CodeUnavailable, "write a blob: %v", err)
	}
	return n, nil
}

// Commit flushes and fsyncs the file, renames it to its ref and fsyncs the
// directory, so that both the bytes and the name survive a crash.
func (w *writer) Commit() (string, error) {
	if err := w.buf.Flush(); err != nil {
		return "", courier.Errorf(courier.CodeUnavailable, "write a blob: %v", err)
	}
	if err := w.f.Sync(); err != nil {
		return "", courier.Errorf(courier.CodeUnavailable, "sync a blob: %v", err)
	}
	final := filepath.Join(w.dir.path, w.ref)
	if err := os.Rename(final+partSuffix, final); err != nil {
		return "", courier.Errorf(courier.CodeUnavailable, "commit a blob: %v", err)
	}
	w.committed = true
	if err := dirsync.Sync(w.dir.path); err != nil {
		return "", courier.Errorf(courier.CodeUnavailable, "sync the blob directory: %v", err)
	}
	return w.ref, nil
}

func (w *writer) name() string {
	if w.committed {
		return filepath.Join(w.dir.path, w.ref)
	}
	return filepath.Join(w.dir.path, w.ref+partSuffix)
}

func (w *writer) Abort() error {
	if w.removed {
		return nil
	}
	w.removed = true
	if err := os.Remove(w.name()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func (w *writer) Close() error {
	if w.f == nil {
		return nil
	}
	var err error
	if !w.committed {
		err = w.Abort()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.f = nil
	return err
}

// Open reads a blob.
func (d *Dir) Open(_ context.Context, ref string) (io.ReadCloser, error) {
	if !validRef(ref) {
		return nil, courier.Errorf(courier.CodeNotFound, "no blob %q", ref)
	}
	f, err := os.Open(filepath.Join(d.path, ref))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, courier.Errorf(courier.CodeNotFound, "blob %s is not there", ref)
	}
	if err != nil {
		return nil, courier.Errorf(courier.CodeUnavailable, "open blob %s: %v", ref, err)
	}
	return f, nil
}

// Remove removes a committed blob no message refers to any more.
func (d *Dir) Remove(_ context.Context, ref string) error {
	if !validRef(ref) {
		return nil
	}
	if err := os.Remove(filepath.Join(d.path, ref)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return courier.Errorf(courier.CodeUnavailable, "remove blob %s: %v", ref, err)
	}
	return nil
}

// Sweep removes the part files no writer holds, and the committed blobs no
// writer holds that referenced does not know.
func (d *Dir) Sweep(ctx context.Context, referenced func(ctx context.Context, refs []string) (map[string]bool, error)) (int, error) {
	entries, err := os.ReadDir(d.path)
	if err != nil {
		return 0, err
	}
	removed := 0
	held := map[string]*os.File{} // committed blobs locked by this sweep, to ask about
	release := func() {
		for _, f := range held {
			f.Close()
		}
		clear(held)
	}
	defer release()
	ask := func() error {
		if len(held) == 0 {
			return nil
		}
		refs := make([]string, 0, len(held))
		for ref := range held {
			refs = append(refs, ref)
		}
		known, err := referenced(ctx, refs)
		if err != nil {
			return err
		}
		for _, ref := range refs {
			if !known[ref] && os.Remove(filepath.Join(d.path, ref)) == nil {
				removed++
			}
		}
		release()
		return nil
	}
	for _, e := range entries {
		name := e.Name()
		ref, part := strings.CutSuffix(name, partSuffix)
		if !e.Type().IsRegular() || !validRef(ref) {
			continue
		}
		f, ok := tryLock(filepath.Join(d.path, name))
		if !ok {
			continue // being written, or gone
		}
		if part {
			// A part file nobody holds is an upload that was cut off.
			if os.Remove(filepath.Join(d.path, name)) == nil {
				removed++
			}
			f.Close()
			continue
		}
		held[ref] = f
		if len(held) >= sweepBatch {
			if err := ask(); err != nil {
				return removed, err
			}
		}
	}
	return removed, ask()
}

// tryLock opens path and takes its lock if no one holds it.
func tryLock(path string) (*os.File, bool) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	return f, true
}

// Usage counts the blobs, part files included, and their bytes.
func (d *Dir) Usage(context.Context) (int, int64, error) {
	entries, err := os.ReadDir(d.path)
	if err != nil {
		return 0, 0, err
	}
	n, size := 0, int64(0)
	for _, e := range entries {
		ref, _ := strings.CutSuffix(e.Name(), partSuffix)
		if !e.Type().IsRegular() || !validRef(ref) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		n++
		size += info.Size()
	}
	return n, size, nil
}
