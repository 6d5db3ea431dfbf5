// Package certfile reads certificate, private key and CA bundle files with
// a bound on their size: a path that names a huge file, or a device that
// never ends, must fail with a clear error, not fill the memory.
package certfile

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
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

// ParseChain reads a PEM text made of X.509 certificates only, the first
// one a receiver's own as PEM chains have it: at least one, each a
// CERTIFICATE block that parses, and nothing after the last. Its errors
// say what is wrong with the text, for the caller to name it: "the
// certificate " + err.
func ParseChain(text string) ([]*x509.Certificate, error) {
	var chain []*x509.Certificate
	rest := []byte(text)
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("holds a PEM %q, not a CERTIFICATE", b.Type)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("does not parse: %w", err)
		}
		chain = append(chain, c)
	}
	if len(chain) == 0 {
		return nil, errors.New("is not PEM")
	}
	if strings.TrimSpace(string(rest)) != "" {
		return nil, errors.New("has text after its PEM blocks")
	}
	return chain, nil
}
