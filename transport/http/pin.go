package http

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"

	"github.com/courier-gw/courier/internal/certfile"
)

// pinCertificate makes cfg accept exactly the certificate in pemText as the
// receiver's and no other. A registry that gives the certificate (NemHandel,
// PEPPOL) is the trust anchor: such certificates are often issued by a
// network's own CA for an access point's id rather than its host name, so
// neither the CA chain nor the host name decides.
func pinCertificate(cfg *tls.Config, pemText string) error {
	chain, err := certfile.ParseChain(pemText)
	if err != nil {
		return fmt.Errorf("the certificate the registry gave %w", err)
	}
	want := chain[0] // the receiver's own, as PEM chains have it
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
