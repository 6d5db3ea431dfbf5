package certfile

import (
	"bytes"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/courier-gw/courier/internal/testkit/testcert"
)

// selfSigned returns a PEM certificate and its PEM key.
func selfSigned(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	c := testcert.New(t, &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "courier test"}}, nil)
	return c.PEM(), c.KeyPEM(t)
}

// wantTooLarge fails unless err says that the file at path is too large,
// naming it.
func wantTooLarge(t *testing.T, err error, path string) {
	t.Helper()
	var pe *fs.PathError
	if !errors.Is(err, ErrTooLarge) || !errors.As(err, &pe) || pe.Path != path || !strings.Contains(err.Error(), path) {
		t.Fatalf("error %v, want ErrTooLarge naming %s", err, path)
	}
}

func TestRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		size int
		ok   bool
	}{
		{"empty", 0, true},
		{"small", 3000, true},
		{"at the limit", MaxSize, true},
		{"one byte over", MaxSize + 1, false},
		{"far over", 4 * MaxSize, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := bytes.Repeat([]byte{'x'}, tc.size)
			p := testcert.WriteFile(t, dir, tc.name, want)
			got, err := Read(p)
			if !tc.ok {
				wantTooLarge(t, err, p)
				if got != nil {
					t.Errorf("read %d bytes along with the error", len(got))
				}
				return
			}
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("read %d bytes, %v; want %d bytes", len(got), err, len(want))
			}
		})
	}
}

func TestReadDoesNotReadADeviceToItsEnd(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	_, err := Read("/dev/zero")
	wantTooLarge(t, err, "/dev/zero")
}

func TestReadErrorsAsReadFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.pem")
	if _, err := Read(missing); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: %v", err)
	}
	_, want := os.ReadFile(dir)
	if _, err := Read(dir); err == nil || err.Error() != want.Error() {
		t.Errorf("a directory: %v, want %v", err, want)
	}
}

func TestLoadKeyPair(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certPEM, keyPEM := selfSigned(t)
	_, otherKeyPEM := selfSigned(t)
	certFile := testcert.WriteFile(t, dir, "a.crt", certPEM)
	keyFile := testcert.WriteFile(t, dir, "a.key", keyPEM)

	cert, err := LoadKeyPair(certFile, keyFile)
	if err != nil || cert.Leaf == nil || cert.Leaf.Subject.CommonName != "courier test" {
		t.Fatalf("LoadKeyPair = %+v, %v", cert.Leaf, err)
	}

	// A certificate file padded with text outside the PEM blocks, as
	// bundles have, beyond the limit.
	bigCert := testcert.WriteFile(t, dir, "big.crt", append(bytes.Repeat([]byte("# comment\n"), MaxSize/10+1), certPEM...))
	_, err = LoadKeyPair(bigCert, keyFile)
	wantTooLarge(t, err, bigCert)
	bigKey := testcert.WriteFile(t, dir, "big.key", append(keyPEM, bytes.Repeat([]byte{'\n'}, MaxSize)...))
	_, err = LoadKeyPair(certFile, bigKey)
	wantTooLarge(t, err, bigKey)

	missing := filepath.Join(dir, "missing.key")
	if _, err := LoadKeyPair(certFile, missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing key: %v", err)
	}
	if _, err := LoadKeyPair(certFile, testcert.WriteFile(t, dir, "other.key", otherKeyPEM)); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("key of another certificate: %v", err)
	}
}

func TestParseChain(t *testing.T) {
	certA, keyA := selfSigned(t)
	certB, _ := selfSigned(t)
	chain, err := ParseChain(string(certA) + string(certB))
	if err != nil || len(chain) != 2 {
		t.Fatalf("a chain of two: %d certificates, %v", len(chain), err)
	}
	if first, _ := ParseChain(string(certA)); !first[0].Equal(chain[0]) {
		t.Error("the chain's first certificate is not the first in the text")
	}
	for _, c := range []struct{ name, text, want string }{
		{"nothing", "  \n", "is not PEM"},
		{"a key", string(keyA), `holds a PEM "EC PRIVATE KEY", not a CERTIFICATE`},
		{"a key after the certificate", string(certA) + string(keyA), `holds a PEM "EC PRIVATE KEY", not a CERTIFICATE`},
		{"junk after the certificate", string(certA) + "junk", "has text after its PEM blocks"},
		{"a block that does not parse", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "does not parse"},
	} {
		if _, err := ParseChain(c.text); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", c.name, err, c.want)
		}
	}
}
