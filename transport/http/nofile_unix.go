//go:build unix

package http

import "syscall"

// openFileLimit returns the process's soft limit on open files.
func openFileLimit() (soft uint64, known bool) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, false
	}
	return uint64(rl.Cur), true
}
