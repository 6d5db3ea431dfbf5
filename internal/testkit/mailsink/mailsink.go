// Package mailsink is a scriptable SMTP receiver for tests: a real SMTP
// server (github.com/emersion/go-smtp) on loopback that keeps every mail it
// accepts and answers RCPT and DATA as a test tells it to.
package mailsink

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	gosasl "github.com/emersion/go-sasl"
	gosmtp "github.com/emersion/go-smtp"
)

// Mail is one mail as the server took it.
type Mail struct {
	From string
	To   []string
	Data []byte // the DATA, as received
	TLS  bool   // it came over STARTTLS
	User string // the AUTH user, if any
}

// Options configure a Sink.
type Options struct {
	TLS   *tls.Config       // offers STARTTLS when set
	Users map[string]string // AUTH accounts; none: AUTH is not offered
	// Mechanisms are the AUTH mechanisms offered: PLAIN and LOGIN;
	// default PLAIN.
	Mechanisms []string
}

// Sink is a running SMTP receiver.
type Sink struct {
	srv   *gosmtp.Server
	ln    net.Listener
	users map[string]string
	mechs []string

	mu       sync.Mutex
	mails    []Mail
	dataErrs []error
	rcptErrs map[string]error
	arrived  chan struct{} // closed and replaced on every accepted mail
}

// Start runs a Sink on addr ("127.0.0.1:0" for any free port).
func Start(addr string, o Options) (*Sink, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Sink{ln: ln, users: o.Users, mechs: o.Mechanisms, rcptErrs: map[string]error{}, arrived: make(chan struct{})}
	if len(s.mechs) == 0 {
		s.mechs = []string{gosasl.Plain}
	}
	s.srv = gosmtp.NewServer(gosmtp.BackendFunc(func(c *gosmtp.Conn) (gosmtp.Session, error) {
		return &session{sink: s, conn: c}, nil
	}))
	s.srv.Domain = "mailsink.test"
	s.srv.TLSConfig = o.TLS
	s.srv.ReadTimeout, s.srv.WriteTimeout = 30*time.Second, 30*time.Second
	s.srv.ErrorLog = nopLogger{}
	go s.srv.Serve(ln)
	return s, nil
}

// MustStart runs a Sink on a free loopback port with the options o,
// failing the test when it cannot, and closes it when the test ends.
func MustStart(t testing.TB, o Options) *Sink {
	t.Helper()
	s, err := Start("127.0.0.1:0", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Addr is the host:port the Sink listens on.
func (s *Sink) Addr() string { return s.ln.Addr().String() }

// Close stops the server.
func (s *Sink) Close() { s.srv.Close() }

// Mails returns the mails accepted so far.
func (s *Sink) Mails() []Mail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Mail(nil), s.mails...)
}

// Wait waits until n mails have been accepted or ctx ends.
func (s *Sink) Wait(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		got, arrived := len(s.mails), s.arrived
		s.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-arrived:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ScriptData sets the answers to the next DATA commands, one each; a nil
// accepts. After them, every DATA is accepted.
func (s *Sink) ScriptData(errs ...error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dataErrs = errs
}

// RefuseRcpt makes RCPT TO the address fail with err.
func (s *Sink) RefuseRcpt(addr string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rcptErrs[addr] = err
}

// Reply builds an SMTP reply for ScriptData and RefuseRcpt:
// Reply(451, "4.3.0", "try again later").
func Reply(code int, enhanced [3]int, text string) error {
	return &gosmtp.SMTPError{Code: code, EnhancedCode: gosmtp.EnhancedCode(enhanced), Message: text}
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}
func (nopLogger) Println(...any)        {}

type session struct {
	sink *Sink
	conn *gosmtp.Conn
	user string
	cur  Mail
}

func (s *session) AuthMechanisms() []string {
	if s.sink.users == nil {
		return nil
	}
	return s.sink.mechs
}

func (s *session) Auth(mech string) (gosasl.Server, error) {
	check := func(username, password string) error {
		if pw, ok := s.sink.users[username]; !ok || pw != password {
			return Reply(535, [3]int{5, 7, 8}, "authentication failed")
		}
		s.user = username
		return nil
	}
	if mech == gosasl.Login {
		return &loginServer{check: check}, nil
	}
	return gosasl.NewPlainServer(func(_, username, password string) error { return check(username, password) }), nil
}

// loginServer is the server side of AUTH LOGIN, which go-sasl leaves out.
type loginServer struct {
	check    func(username, password string) error
	username string
	step     int
}

func (l *loginServer) Next(response []byte) ([]byte, bool, error) {
	l.step++
	switch l.step {
	case 1:
		if len(response) > 0 { // an initial response is the user name
			l.username = string(response)
			l.step++
			return []byte("Password:"), false, nil
		}
		return []byte("Username:"), false, nil
	case 2:
		l.username = string(response)
		return []byte("Password:"), false, nil
	}
	return nil, true, l.check(l.username, string(response))
}

func (s *session) Mail(from string, _ *gosmtp.MailOptions) error {
	if s.sink.users != nil && s.user == "" {
		return Reply(530, [3]int{5, 7, 0}, "authentication required")
	}
	s.cur = Mail{From: from}
	return nil
}

func (s *session) Rcpt(to string, _ *gosmtp.RcptOptions) error {
	s.sink.mu.Lock()
	err := s.sink.rcptErrs[to]
	s.sink.mu.Unlock()
	if err != nil {
		return err
	}
	s.cur.To = append(s.cur.To, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.sink.mu.Lock()
	defer s.sink.mu.Unlock()
	if len(s.sink.dataErrs) > 0 {
		err := s.sink.dataErrs[0]
		s.sink.dataErrs = s.sink.dataErrs[1:]
		if err != nil {
			return err
		}
	}
	_, tlsOn := s.conn.TLSConnectionState()
	s.cur.Data, s.cur.TLS, s.cur.User = data, tlsOn, s.user
	s.sink.mails = append(s.sink.mails, s.cur)
	close(s.sink.arrived)
	s.sink.arrived = make(chan struct{})
	return nil
}

func (s *session) Reset()        { s.cur = Mail{} }
func (s *session) Logout() error { return nil }
