//go:build !unix

package http

// openFileLimit reports the open-file limit unknown where there is no
// getrlimit.
func openFileLimit() (soft uint64, known bool) { return 0, false }
