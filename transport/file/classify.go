package file

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"

	"github.com/courier-gw/courier"
)

// classify maps a failed write onto an error class and a sentence for
// people. The file system's refusals of the place (full, read-only, no
// permission, missing directory) are transport failures: they are the
// endpoint's to fix and the message goes again. A name the file system
// cannot take is rejected: no retry makes it fit.
func classify(err error, path string) (courier.ErrorClass, string) {
	name := filepath.Base(path)
	var ee *existsError
	if errors.As(err, &ee) {
		what := fmt.Sprintf("%d bytes", ee.size)
		if ee.size < 0 {
			what = "no regular file"
		}
		return courier.ClassTransport, fmt.Sprintf("%s exists with other content (%s); not overwritten", path, what)
	}
	var errno syscall.Errno
	errors.As(err, &errno)
	switch errno {
	case syscall.ENOSPC, syscall.EDQUOT:
		return courier.ClassTransport, fmt.Sprintf("no space left for %s: %s", path, errno)
	case syscall.EACCES, syscall.EPERM:
		return courier.ClassTransport, fmt.Sprintf("permission denied writing %s", path)
	case syscall.EROFS:
		return courier.ClassTransport, fmt.Sprintf("cannot write %s: read-only file system", path)
	case syscall.ENAMETOOLONG:
		return courier.ClassRejected, fmt.Sprintf("file name %s is too long for the file system", name)
	case syscall.EILSEQ:
		return courier.ClassRejected, fmt.Sprintf("file name %s is refused by the file system", name)
	case syscall.ENOENT:
		return courier.ClassTransport, fmt.Sprintf("directory %s does not exist", filepath.Dir(path))
	case syscall.ENOTDIR:
		return courier.ClassTransport, fmt.Sprintf("%s is not a directory", filepath.Dir(path))
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return courier.ClassTransport, fmt.Sprintf("%s %s: %v", pe.Op, path, pe.Err)
	}
	return courier.ClassTransport, fmt.Sprintf("writing %s: %v", path, err)
}
