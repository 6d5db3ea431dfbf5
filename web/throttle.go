package web

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// The login throttle's rules.
const (
	// freeFailures is how many wrong keys in a row an address may give
	// before it must wait.
	freeFailures = 5
	// firstWait is the first wait; each further wrong key doubles it, up
	// to maxWait.
	firstWait = time.Minute
	maxWait   = time.Hour
	// forgetAfter forgets the failures of an address quiet for so long.
	forgetAfter = 24 * time.Hour
	// logEvery is the least time between two log lines about one address.
	logEvery = time.Minute
	// maxAddrs bounds the addresses remembered.
	maxAddrs = 10000
)

// loginThrottle slows down guessing keys at the login form: after
// freeFailures wrong keys in a row from one address, that address is
// refused for a while, longer after each further wrong key. It also keeps
// the log from filling with one line per wrong key. Addresses are those of
// the connections (behind a proxy, the proxy's: all who come through it
// wait together, which is the safe side).
type loginThrottle struct {
	mu     sync.Mutex
	byAddr map[string]*loginFailures
}

type loginFailures struct {
	failures int       // wrong keys in a row
	last     time.Time // the last wrong key
	until    time.Time // refused until then
	logged   time.Time // the last log line
	unlogged int       // wrong keys since the last log line
	refused  int       // attempts refused while waiting, since the last log line
}

// failureReport is what a log line about an address says.
type failureReport struct {
	failures     int       // wrong keys since the last line
	refused      int       // attempts refused while waiting since the last line
	blockedUntil time.Time // when the address may try again; zero if it may now
}

// wait returns how long the address must still wait before it may try a
// key; 0 if it may now.
func (t *loginThrottle) wait(addr string, now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.byAddr[addr]
	if f == nil || !now.Before(f.until) {
		return 0
	}
	f.refused++
	return f.until.Sub(now)
}

// fail records a wrong key from the address. due says whether a log line
// about it is due (at most one per logEvery); the report is what it says.
func (t *loginThrottle) fail(addr string, now time.Time) (rep failureReport, due bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byAddr == nil {
		t.byAddr = map[string]*loginFailures{}
	}
	f := t.byAddr[addr]
	if f != nil && now.Sub(f.last) >= forgetAfter {
		f = nil
	}
	if f == nil {
		if len(t.byAddr) >= maxAddrs {
			t.forget(now)
		}
		f = &loginFailures{}
		t.byAddr[addr] = f
	}
	f.failures++
	f.unlogged++
	f.last = now
	if n := f.failures - freeFailures; n >= 0 {
		wait := maxWait
		if n < 6 { // 2^6 minutes is past maxWait
			wait = min(firstWait<<n, maxWait)
		}
		f.until = now.Add(wait)
	}
	if !f.logged.IsZero() && now.Sub(f.logged) < logEvery {
		return failureReport{}, false
	}
	rep = failureReport{failures: f.unlogged, refused: f.refused}
	if now.Before(f.until) {
		rep.blockedUntil = f.until
	}
	f.logged, f.unlogged, f.refused = now, 0, 0
	return rep, true
}

// forget drops the addresses quiet for forgetAfter and, if that is not
// enough, the one quiet longest.
func (t *loginThrottle) forget(now time.Time) {
	var oldest string
	for addr, f := range t.byAddr {
		if now.Sub(f.last) >= forgetAfter && !now.Before(f.until) {
			delete(t.byAddr, addr)
			continue
		}
		if oldest == "" || f.last.Before(t.byAddr[oldest].last) {
			oldest = addr
		}
	}
	if len(t.byAddr) >= maxAddrs {
		delete(t.byAddr, oldest)
	}
}

// succeeded forgets the failures of an address that gave a valid key.
func (t *loginThrottle) succeeded(addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.byAddr, addr)
}

// remoteAddr is the address a login counts against: the connection's IP,
// and for IPv6 its /64, which one client usually has whole.
func remoteAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	if ip.To4() == nil {
		return (&net.IPNet{IP: ip.Mask(net.CIDRMask(64, 128)), Mask: net.CIDRMask(64, 128)}).String()
	}
	return ip.String()
}
