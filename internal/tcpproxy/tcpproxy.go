// Package tcpproxy forwards TCP connections from a local address to an
// upstream one. Tests put it between courier and a shared broker to take the
// broker away and bring it back, as a broker that stops and starts again
// looks to a client, without stopping the broker that others use.
package tcpproxy

import (
	"net"
	"net/url"
	"sync"
	"testing"
)

// Proxy forwards connections on one listening address to upstream.
type Proxy struct {
	ln       net.Listener
	upstream string

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
	gate   chan struct{} // closed while bytes flow; open while frozen
	wg     sync.WaitGroup
}

// Start listens on addr ("127.0.0.1:0" for any free port) and forwards each
// connection to upstream.
func Start(addr, upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	gate := make(chan struct{})
	close(gate)
	p := &Proxy{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}, gate: gate}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops listening and cuts every forwarded connection, as a broker
// that goes down does.
func (p *Proxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.Thaw() // a frozen pipe finds its connections closed and ends
	p.wg.Wait()
}

// MustStart starts a proxy as Start does, failing the test when it cannot,
// and closes it when the test ends.
func MustStart(t testing.TB, addr, upstream string) *Proxy {
	t.Helper()
	p, err := Start(addr, upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// Via starts a proxy in front of the server of a URL, a broker's say, and
// returns it with the URL that leads through it.
func Via(t testing.TB, rawURL string) (*Proxy, string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	p := MustStart(t, "127.0.0.1:0", u.Host)
	via := *u
	via.Host = p.Addr()
	return p, via.String()
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.upstream)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, up) {
			return
		}
		p.wg.Add(2)
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

// track records a pair of connections; false when the proxy is closing.
func (p *Proxy) track(a, b net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		a.Close()
		b.Close()
		return false
	}
	p.conns[a], p.conns[b] = struct{}{}, struct{}{}
	return true
}

// Freeze holds every byte in both directions, keeping the connections
// open: a peer that hangs, as a stalled broker does.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
		p.gate = make(chan struct{})
	default:
	}
}

// Thaw lets the held bytes and all later ones through again.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

func (p *Proxy) currentGate() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gate
}

func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			<-p.currentGate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// FreeAddr returns a loopback address where nothing listens at the moment
// of the call, for a proxy to be started on later.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr, nil
}
