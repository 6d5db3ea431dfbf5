package http

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// pinCertificate makes cfg accept exactly the certificate in pemText as the
// receiver's and no other. A registry that gives the certificate (NemHandel,
// PEPPOL) is the trust anchor: such certificates are often issued by a
// network's own CA for an access point's id rather than its host name, so
// neither the CA chain nor the host name decides.
func pinCertificate(cfg *tls.Config, pemText string) error {
	want, err := parsePin(pemText)
	if err != nil {
		return err
	}
	// The chain and host name checks are skipped, not the certificate
	// check: VerifyConnection still runs, on resumed sessions too (where
	// VerifyPeerCertificate would not), and the base's own hooks go as
	// they assume a verified chain.
	cfg.InsecureSkipVerify = true
	cfg.VerifyPeerCertificate = nil
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return &pinError{want: want}
		}
		if got := cs.PeerCertificates[0]; !bytes.Equal(got.Raw, want.Raw) {
			return &pinError{got: got, want: want}
		}
		return nil
	}
	return nil
}

// parsePin reads the certificate of a pinned PEM text: the first of a
// chain.
func parsePin(pemText string) (*x509.Certificate, error) {
	block, rest := pem.Decode([]byte(pemText))
	if block == nil {
		return nil, errors.New("the certificate the registry gave is not PEM")
	}
	if block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("the certificate the registry gave is a PEM %q, not a CERTIFICATE", block.Type)
	}
	// A chain names the receiver's own certificate first, as PEM chains
	// do: that one is pinned, the rest must be certificates too.
	for next, more := pem.Decode(rest); next != nil; next, more = pem.Decode(more) {
		if next.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("the certificate chain the registry gave holds a PEM %q", next.Type)
		}
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("the certificate the registry gave does not parse: %v", err)
	}
	return cert, nil
}

// pinError is a receiver that presented another certificate than the
// pinned one. Its message is the cause of a class tls result.
type pinError struct {
	got  *x509.Certificate // nil when the receiver presented none
	want *x509.Certificate
}

func (e *pinError) Error() string {
	if e.got == nil {
		return fmt.Sprintf("the receiver presented no certificate; the registry gave SHA-256 %s", fingerprint(e.want))
	}
	return fmt.Sprintf("the receiver's certificate is not the one the registry gave: it presented SHA-256 %s, the registry gave SHA-256 %s",
		fingerprint(e.got), fingerprint(e.want))
}

// fingerprint is the SHA-256 of a certificate's DER in the form
// `openssl x509 -fingerprint -sha256` prints, for comparison by hand.
func fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	var b strings.Builder
	for i, x := range sum {
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%02X", x)
	}
	return b.String()
}
