package file

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"testing"

	"github.com/courier-gw/courier"
)

// TestClassify covers the refusals that no test can provoke on a healthy
// disk (full, over quota, read-only), with the error shapes os returns.
func TestClassify(t *testing.T) {
	t.Parallel()
	const path = "/out/inv-1.xml"
	pathErr := func(errno syscall.Errno) error { return &fs.PathError{Op: "open", Path: path, Err: errno} }
	for _, tc := range []struct {
		name  string
		err   error
		class courier.ErrorClass
		msg   string
	}{
		{"disk full", pathErr(syscall.ENOSPC), courier.ClassTransport, "no space left for /out/inv-1.xml: no space left on device"},
		{"over quota", pathErr(syscall.EDQUOT), courier.ClassTransport, "no space left for /out/inv-1.xml: disk quota exceeded"},
		{"permission denied", pathErr(syscall.EACCES), courier.ClassTransport, "permission denied writing /out/inv-1.xml"},
		{"operation not permitted", &os.LinkError{Op: "link", Old: "/out/.courier-1.tmp", New: path, Err: syscall.EPERM}, courier.ClassTransport, "permission denied writing /out/inv-1.xml"},
		{"read-only", pathErr(syscall.EROFS), courier.ClassTransport, "cannot write /out/inv-1.xml: read-only file system"},
		{"name too long", pathErr(syscall.ENAMETOOLONG), courier.ClassRejected, "file name inv-1.xml is too long for the file system"},
		{"no directory", pathErr(syscall.ENOENT), courier.ClassTransport, "directory /out does not exist"},
		{"other file there", &existsError{size: 7}, courier.ClassTransport, "/out/inv-1.xml exists with other content (7 bytes); not overwritten"},
		{"a directory there", &existsError{size: -1}, courier.ClassTransport, "/out/inv-1.xml exists with other content (no regular file); not overwritten"},
		{"i/o error", pathErr(syscall.EIO), courier.ClassTransport, "open /out/inv-1.xml: input/output error"},
		{"anything else", fmt.Errorf("odd"), courier.ClassTransport, "writing /out/inv-1.xml: odd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			class, msg := classify(tc.err, path)
			if class != tc.class || msg != tc.msg {
				t.Errorf("got %s %q, want %s %q", class, msg, tc.class, tc.msg)
			}
		})
	}
}
