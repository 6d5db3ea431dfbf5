// Package smtp delivers messages as e-mail: one MIME message per attempt
// to the endpoint's mail server, with STARTTLS when the server offers it and
// AUTH when the endpoint has credentials. Text payloads travel inline, other
// payloads as an attachment, and so does a payload kept as a blob, encoded
// as it streams from the store; notices (courier.notice) become readable
// mails for people. Reply codes map onto the error classes of docs/design.md §3: 4xx is
// transport (tried again), 5xx to the message is rejected (suspended).
//
// Callers import it under an alias (smtptransport
// "github.com/courier-gw/courier/transport/smtp").
package smtp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	netsmtp "net/smtp"
	"os"
	"time"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/sendopts"
)

// Defaults of Options.
const (
	DefaultTimeout        = sendopts.DefaultTimeout // the attempt timeout of an endpoint that sets none
	DefaultConnectTimeout = sendopts.DefaultConnectTimeout
)

// Options configure a Transport. Every field has a default.
type Options struct {
	Logger *slog.Logger
	Clock  courier.Clock // gives the Date header

	// Hostname is the name courier gives in EHLO and on the right of
	// Message-ID; default the machine's host name.
	Hostname string
	// PublicURL is where people reach courier's dashboard; notices link
	// to the message's page under it when set.
	PublicURL string

	DefaultTimeout time.Duration
	ConnectTimeout time.Duration
	// TLSConfig is the base of STARTTLS settings (private root CAs); nil
	// uses the system roots. The server name is the endpoint's host.
	TLSConfig *tls.Config
	// Resolver looks up host names; nil uses the system's.
	Resolver *net.Resolver
}

// Transport sends deliveries to smtp endpoints, one connection per attempt.
// It is safe for concurrent use.
type Transport struct {
	opts Options
}

var _ courier.Sender = (*Transport)(nil)

// New returns a Transport with o's unset fields at their defaults.
func New(o Options) *Transport {
	sendopts.Common{Logger: &o.Logger, Clock: &o.Clock, DefaultTimeout: &o.DefaultTimeout, ConnectTimeout: &o.ConnectTimeout}.SetDefaults()
	if o.Hostname == "" {
		o.Hostname, _ = os.Hostname()
		if !validDomain(o.Hostname) {
			o.Hostname = "localhost"
		}
	}
	if o.TLSConfig == nil {
		o.TLSConfig = &tls.Config{}
	}
	return &Transport{opts: o}
}

// Close releases nothing: every attempt has its own connection. It is there
// so that every transport stops alike.
func (t *Transport) Close() {}

// errAttemptTimeout is the cause of an attempt's context when the
// endpoint's timeout ran out.
var errAttemptTimeout = errors.New("endpoint timeout")

// Send makes one attempt to mail d.Message to d.Endpoint's recipients. It
// never returns an error: every failure is a Result with a class.
func (t *Transport) Send(ctx context.Context, d courier.Delivery) courier.Result {
	if fail := sendopts.Unsendable(d); fail != nil {
		return *fail
	}
	m, e := d.Message, d.Endpoint
	s := settingsOf(e)
	if len(s.To) == 0 || s.From == "" {
		return courier.Result{Class: courier.ClassTransport, Error: fmt.Sprintf("endpoint %s has no sender or no recipients", e.Name)}
	}
	mail, err := compose(d, t.opts.Clock.Now(), t.opts.Hostname, t.opts.PublicURL)
	if err != nil {
		return courier.Result{Class: courier.ClassRejected, Error: err.Error()}
	}
	timeout := sendopts.Timeout(e, t.opts.DefaultTimeout)
	actx, cancel := context.WithTimeoutCause(ctx, timeout, errAttemptTimeout)
	defer cancel()

	// A blob is opened before the server is spoken to, so that one the
	// store cannot give costs no session, and read as DATA goes out.
	var blob *courier.PayloadReader
	var payload io.Reader // the blob, when there is one
	if mail.blob {
		r, err := d.OpenPayload(actx)
		if err != nil {
			return payloadResult(err)
		}
		defer r.Close()
		blob = courier.NewPayloadReader(r, int64(m.Size))
		payload = blob
	}
	st := &session{addr: s.Addr}
	err = t.deliver(actx, st, e, func(w io.Writer) error { return mail.writeTo(w, payload) })
	if err == nil {
		return courier.Result{Status: 250, Response: fmt.Sprintf("accepted by %s for %d recipient(s)", s.Addr, len(s.To))}
	}
	if blob != nil && blob.Err() != nil {
		// The mail was cut off before its end, which the server never
		// got: it takes nothing.
		return payloadResult(blob.Err())
	}
	if ctx.Err() == context.Canceled {
		return courier.Result{Class: courier.ClassTransport, Error: "attempt canceled"}
	}
	return classify(err, st)
}

// payloadResult is the Result of an attempt whose payload the store could
// not give: transient, and not the mail server's fault.
func payloadResult(err error) courier.Result {
	return courier.Result{Class: courier.ClassTransport, Error: "cannot read the payload from the store: " + err.Error()}
}

// session records how far one attempt got, for its classification.
type session struct {
	addr      string
	stage     string // the command under way, for the error message
	connected bool
	message   bool // the commands about the message itself began (MAIL FROM)
}

// deliver runs one SMTP session: connect, EHLO, STARTTLS, AUTH, MAIL, RCPT,
// DATA, QUIT. write writes the mail into DATA; when it fails, the session
// ends without the end of DATA, so the server takes nothing.
//
// The client is net/smtp's, not go-smtp's: go-smtp's takes up STARTTLS only
// as it opens a session (greeting as "localhost", and failing where the
// server does not offer it), so starttls auto would cost a second
// connection, and it sets its own deadline on the socket for every command,
// none while DATA is written, over the attempt's.
func (t *Transport) deliver(ctx context.Context, st *session, e *courier.Endpoint, write func(io.Writer) error) error {
	s := settingsOf(e)
	host, _, err := net.SplitHostPort(s.Addr)
	if err != nil {
		return fmt.Errorf("endpoint %s: address %q: %w", e.Name, s.Addr, err)
	}
	st.stage = "connect"
	dctx, dcancel := context.WithTimeout(ctx, t.opts.ConnectTimeout)
	dialer := net.Dialer{Resolver: t.opts.Resolver}
	conn, err := dialer.DialContext(dctx, "tcp", s.Addr)
	dcancel()
	if err != nil {
		return err
	}
	defer conn.Close()
	st.connected = true
	// The protocol has no context: a deadline on the socket ends every read
	// and write once the attempt's time is up or the caller gives up.
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	st.stage = "greeting"
	c, err := netsmtp.NewClient(conn, host)
	if err != nil {
		return err
	}
	defer c.Close()
	st.stage = "EHLO"
	if err := c.Hello(t.opts.Hostname); err != nil {
		return err
	}
	if s.StartTLS != "never" {
		if ok, _ := c.Extension("STARTTLS"); ok {
			st.stage = "STARTTLS"
			cfg := t.opts.TLSConfig.Clone()
			if cfg.ServerName == "" {
				cfg.ServerName = host
			}
			if err := c.StartTLS(cfg); err != nil {
				return &tlsError{err: err}
			}
		} else if s.StartTLS == "always" {
			return &tlsError{err: errors.New("the server does not offer STARTTLS and the endpoint requires it")}
		}
	}
	if s.Username != "" {
		st.stage = "AUTH"
		ok, mechs := c.Extension("AUTH")
		if !ok {
			return errors.New("the server offers no AUTH and the endpoint has credentials")
		}
		a, err := authFor(mechs, s.Username, s.Password, host)
		if err != nil {
			return err
		}
		if err := c.Auth(a); err != nil {
			return err
		}
	}
	st.message = true
	st.stage = "MAIL FROM"
	if err := c.Mail(s.From); err != nil {
		return err
	}
	for _, to := range s.To {
		st.stage = "RCPT TO " + to
		if err := c.Rcpt(to); err != nil {
			return err
		}
	}
	st.stage = "DATA"
	w, err := c.Data()
	if err != nil {
		return err
	}
	if err := write(w); err != nil {
		return err
	}
	st.stage = "end of DATA"
	if err := w.Close(); err != nil {
		return err
	}
	// The message is the server's now; a failed QUIT changes nothing.
	st.stage = "QUIT"
	c.Quit()
	return nil
}

// tlsError is a failed or missing STARTTLS.
type tlsError struct{ err error }

func (e *tlsError) Error() string { return "STARTTLS: " + e.err.Error() }
func (e *tlsError) Unwrap() error { return e.err }
