package http

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/courier-gw/courier/internal/certfile"
)

// endpointTLS returns the TLS settings of an endpoint: the base settings
// with the endpoint's client certificate and CA bundle, read from their
// files when its pool is built (a reload that changes a path reads anew),
// and its pinned certificate, if any.
func (t *Transport) endpointTLS(files TLS, pin string) (*tls.Config, error) {
	cfg := t.opts.TLSConfig.Clone()
	if files.Cert != "" {
		cert, err := certfile.LoadKeyPair(files.Cert, files.Key)
		if err != nil {
			return nil, fmt.Errorf("cannot load the client certificate %s with its key: %s", files.Cert, fileProblem(err))
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if files.CA != "" {
		pem, err := certfile.Read(files.CA)
		if err != nil {
			return nil, fmt.Errorf("cannot read the CA bundle: %s", fileProblem(err))
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("the CA bundle %s holds no PEM certificate", files.CA)
		}
		cfg.RootCAs = pool
	}
	if pin != "" {
		if err := pinCertificate(cfg, pin); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// fileProblem says what is wrong with a certificate or key file without the
// library's detail, which for a key could echo what it read.
func fileProblem(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Path + ": " + pe.Err.Error()
	}
	if strings.Contains(err.Error(), "private key does not match") {
		return "the private key does not match the certificate"
	}
	return "not a PEM certificate and its PEM private key"
}
