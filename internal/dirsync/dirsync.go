// Package dirsync makes the entries of a directory durable: after a file is
// created, renamed or linked in it, its name survives a crash only once the
// directory itself is synced.
package dirsync

import (
	"errors"
	"os"
	"syscall"
)

// Sync fsyncs the directory dir.
func Sync(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		// EINVAL and ENOTSUP: a file system that cannot sync directories
		// (some network shares) has nothing more to make durable.
		return err
	}
	return nil
}
