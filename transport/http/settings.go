package http

import (
	"crypto/x509"
	"encoding/base64"
	"errors"
	"io/fs"
	"slices"
	"strings"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/certfile"
	"github.com/courier-gw/courier/internal/check"
)

// Kind is the http transport as the configuration, the API and the server
// know it (package transport lists it).
var Kind = courier.NewTransportKind(courier.TransportHTTP,
	[]string{"url", "method", "secret", "follow_redirects", "allow_networks", "tls", "auth", "headers", "signature", "egress"},
	func(f courier.SettingsFields) *Settings { return Decode(f, true) }, wire,
	func(o courier.SenderOptions) *Transport {
		return New(Options{Logger: o.Logger, AllowNetworks: o.AllowNetworks})
	})

// Settings are an http endpoint's settings.
type Settings struct {
	URL             string
	Method          string
	Secrets         []string // Standard Webhooks secrets; several during rotation
	FollowRedirects bool
	AllowNetworks   []string // CIDRs this endpoint may reach despite the SSRF guard
	TLS             TLS
	// PinnedCertificate, when set, is the PEM certificate the receiver must
	// present: the one a registry gave for a resolved endpoint (the
	// NemHandel and PEPPOL trust model). Any other is refused, class tls.
	PinnedCertificate string

	// Auth are the credentials the endpoint sends, and Headers its own
	// request headers (auth.go).
	Auth    Auth
	Headers []Header
	// How requests are signed and which way they leave
	// (sign_ed25519.go, proxy.go).
	Signature string // SignatureV1 or SignatureV1a; empty: v1 when there are secrets
	Egress    Egress
}

// TLS are the files of an http endpoint's TLS settings: a client
// certificate and its key for receivers that require mutual TLS (PEPPOL
// access points), and a CA bundle to trust instead of the system roots.
// Empty fields are not used.
type TLS struct {
	Cert string // PEM client certificate (chain)
	Key  string // PEM private key of Cert
	CA   string // PEM bundle of the CAs that may sign the receiver's certificate
}

var _ courier.ResolvableSettings = (*Settings)(nil)

// Of returns the http settings of e, giving e empty ones if it has none:
// for whoever makes an endpoint.
func Of(e *courier.Endpoint) *Settings { return courier.SettingsOf[Settings](e) }

// settingsOf returns the http settings of e, empty ones if it has none,
// without changing e: for a sender, which shares e with others.
func settingsOf(e *courier.Endpoint) *Settings { return courier.SettingsIn[Settings](e) }

// Target is the URL.
func (s *Settings) Target() string { return s.URL }

// Redacted returns a copy without the secrets, and the URL without its
// password and query values.
func (s *Settings) Redacted() courier.Settings {
	c := *s
	c.Secrets = courier.RedactSecrets(s.Secrets)
	c.URL = courier.RedactURL(s.URL)
	c.Auth, c.Headers = s.Auth.redacted(), redactedHeaders(s.Headers)
	c.Egress.Proxy = redactProxy(s.Egress.Proxy)
	return &c
}

// Resolve returns a copy that delivers to url, trusting only certificate
// when it is given: a lookup route's template made a resolved endpoint.
func (s *Settings) Resolve(url, certificate string) courier.Settings {
	c := *s
	c.URL, c.PinnedCertificate = url, certificate
	if c.Method == "" {
		c.Method = "POST"
	}
	return &c
}

var methods = []string{"POST", "PUT", "PATCH", "GET", "DELETE", "HEAD", "OPTIONS"}

// Decode reads an http endpoint's fields: with url, those of an endpoint;
// without, those of the template of a lookup route's resolved endpoints,
// whose URL the registry gives.
func Decode(f courier.SettingsFields, url bool) *Settings {
	h := &Settings{Method: "POST"}
	if url && f.Required("url", ": the receiver's http or https URL") {
		if l := f.String("url", &h.URL); l > 0 && check.URL(h.URL, "http", "https") != nil {
			f.ErrorAt(l, f.Field("url"), "must be an absolute http or https URL")
		}
	}
	if l := f.String("method", &h.Method); l > 0 && !slices.Contains(methods, h.Method) {
		f.ErrorAt(l, f.Field("method"), "must be one of %s, not %q", strings.Join(methods, ", "), check.Clip(h.Method))
	}
	var secret string
	if l := f.String("secret", &secret); l > 0 {
		h.Secrets = strings.Fields(secret)
		if len(h.Secrets) == 0 {
			f.ErrorAt(l, f.Field("secret"), "is empty; leave the field out to send unsigned requests")
		}
		for i, sec := range h.Secrets {
			// Never quoted back: the message would put the secret in a log.
			if enc, ok := strings.CutPrefix(sec, "whsec_"); ok && !validBase64(enc) {
				f.ErrorAt(l, f.Field("secret"), "secret %d of %d starts with whsec_ but is not base64 after it (Standard Webhooks secrets are whsec_<base64>)", i+1, len(h.Secrets))
			}
		}
	}
	f.Bool("follow_redirects", &h.FollowRedirects)
	h.AllowNetworks = f.Networks("allow_networks")
	if t := f.Sub("tls", []string{"cert", "key", "ca"}); t != nil {
		decodeTLS(t, &h.TLS)
	}
	decodeAuth(f, h)
	decodeSignature(f, h)
	decodeEgress(f, h)
	return h
}

// decodeTLS reads an endpoint's TLS files and checks that they load, so
// that a wrong path or a key that does not match shows at start, not at
// the first attempt. The messages never quote the files' content.
func decodeTLS(f courier.SettingsFields, t *TLS) {
	certLine := f.String("cert", &t.Cert)
	f.String("key", &t.Key)
	switch {
	case t.Cert != "" && t.Key == "":
		f.Errorf("key", "required when tls.cert is set: the client certificate's private key")
	case t.Key != "" && t.Cert == "":
		f.Errorf("cert", "required when tls.key is set: the client certificate")
	case t.Cert != "":
		if _, err := certfile.LoadKeyPair(t.Cert, t.Key); err != nil {
			f.ErrorAt(certLine, f.Field("cert"), "cannot load the client certificate with key %s: %s", t.Key, loadProblem(err))
		}
	}
	if l := f.String("ca", &t.CA); l > 0 {
		pem, err := certfile.Read(t.CA)
		switch {
		case err != nil:
			f.ErrorAt(l, f.Field("ca"), "cannot read the CA bundle: %s", loadProblem(err))
		case !x509.NewCertPool().AppendCertsFromPEM(pem):
			f.ErrorAt(l, f.Field("ca"), "%s holds no PEM certificate", t.CA)
		}
	}
}

// loadProblem says what is wrong with the files of tls: without the
// library's detail, which for a key file could echo what it read; unlike
// fileProblem, it speaks of the files, not of one of them.
func loadProblem(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Path + ": " + pe.Err.Error()
	}
	msg := err.Error()
	if strings.Contains(msg, "private key does not match") {
		return "the private key does not match the certificate"
	}
	return "the files are not a PEM certificate and its PEM private key"
}

func validBase64(s string) bool {
	if _, err := base64.StdEncoding.DecodeString(s); err == nil {
		return s != ""
	}
	_, err := base64.RawStdEncoding.DecodeString(s)
	return err == nil && s != ""
}

// Wire are an http endpoint's settings as the API shows them; secrets are
// REDACTED.
type Wire struct {
	URL             string   `json:"url"`
	Method          string   `json:"method,omitempty"`
	Secrets         []string `json:"secrets,omitempty"`
	FollowRedirects bool     `json:"follow_redirects,omitempty"`
	AllowNetworks   []string `json:"allow_networks,omitempty"`
	TLSCert         string   `json:"tls_cert,omitempty"`
	TLSKey          string   `json:"tls_key,omitempty"`
	TLSCA           string   `json:"tls_ca,omitempty"`

	Auth      *AuthWire         `json:"auth,omitempty"`
	Headers   map[string]string `json:"headers,omitempty"`
	Signature string            `json:"signature,omitempty"`
	Egress    *Egress           `json:"egress,omitempty"`
}

func wire(h *Settings) Wire {
	return Wire{URL: h.URL, Method: h.Method, Secrets: h.Secrets, FollowRedirects: h.FollowRedirects,
		AllowNetworks: h.AllowNetworks, TLSCert: h.TLS.Cert, TLSKey: h.TLS.Key, TLSCA: h.TLS.CA,
		Auth: authWire(h.Auth), Headers: headersWire(h.Headers),
		Signature: h.Signature, Egress: h.Egress.wire()}
}
