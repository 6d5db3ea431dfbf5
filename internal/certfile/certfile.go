// Package certfile reads certificate, private key and CA bundle files with
// a bound on their size: a path that names a huge file, or a device that
// never ends, must fail with a clear error, not fill the memory.
package certfile

import (
	"crypto/tls"
	"errors"
	"io"
	"io/fs"
	"os"
)

// MaxSize is the most a certificate, key or CA bundle file may hold. Real
// ones take a few KiB; a bundle of every public root CA about 250 KiB.
const MaxSize = 1 << 20

// ErrTooLarge is the error, inside an *fs.PathError that names the file,
// of a file larger than MaxSize.
var ErrTooLarge = errors.New("larger than 1 MiB, the limit for a certificate, key or CA bundle file")

// Read returns the content of the file at path, as os.ReadFile does, but
// refuses one larger than MaxSize.
func Read(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxSize {
		return nil, &fs.PathError{Op: "read", Path: path, Err: ErrTooLarge}
	}
	return data, nil
}

// LoadKeyPair reads a PEM certificate and its PEM private key through Read
// and parses them, as tls.LoadX509KeyPair does.
func LoadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := Read(certFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := Read(keyFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}
