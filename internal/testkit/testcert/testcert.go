// Package testcert makes certificates for tests: self-signed, or signed by
// another one made here.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Cert is a certificate and its key.
type Cert struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	DER  []byte
}

// New makes a certificate from tmpl with a new P-256 key, signed by parent,
// or by itself when parent is nil. A template without a serial number gets
// a random one, and one without a validity is valid from an hour ago to an
// hour from now.
func New(t testing.TB, tmpl *x509.Certificate, parent *Cert) *Cert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if tmpl.SerialNumber == nil {
		tmpl.SerialNumber, _ = rand.Int(rand.Reader, big.NewInt(1<<62))
	}
	if tmpl.NotBefore.IsZero() && tmpl.NotAfter.IsZero() {
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.Cert, parent.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &Cert{Cert: cert, Key: key, DER: der}
}

// PEM is the certificate, PEM-encoded.
func (c *Cert) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.DER})
}

// KeyPEM is the key, PEM-encoded.
func (c *Cert) KeyPEM(t testing.TB) []byte {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(c.Key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

// TLS is the certificate and key for a tls.Config.
func (c *Cert) TLS() tls.Certificate {
	return tls.Certificate{Certificate: [][]byte{c.DER}, PrivateKey: c.Key, Leaf: c.Cert}
}

// Write writes the certificate and the key as PEM files.
func (c *Cert) Write(t testing.TB, certFile, keyFile string) {
	t.Helper()
	if err := os.WriteFile(certFile, c.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, c.KeyPEM(t), 0o600); err != nil {
		t.Fatal(err)
	}
}

// WriteFile writes data to the file name in dir, as the certificate, key
// or CA bundle of a test that reads them from files, and returns its path.
func WriteFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
