package http_test

import (
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/courier-gw/courier"
	httptransport "github.com/courier-gw/courier/transport/http"
)

// fullListener returns the address of a loopback socket whose accept queue
// is full: it listens with a backlog of 0 and never accepts, and test
// connections fill the queue. Linux then drops further SYNs, so a connect
// hangs as it does to a host that is down, without a packet leaving the
// machine. It skips the test if the kernel does not behave so.
func fullListener(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
	for range 8 {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				return addr // the queue is full
			}
			t.Fatalf("filling the accept queue: %v", err)
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Skip("the kernel kept accepting connections into a full queue; connect_timeout is covered by the classifier tests")
	return ""
}

func TestConnectTimeout(t *testing.T) {
	t.Parallel()
	addr := fullListener(t)
	tr := newTransport(t, httptransport.Options{ConnectTimeout: 300 * time.Millisecond})
	start := time.Now()
	res := send(t, tr, endpoint("full", "http://"+addr+"/in"), message())
	wantClass(t, res, courier.ClassConnectTimeout)
	if want := "no connection to " + addr + " within 300ms"; res.Error != want {
		t.Fatalf("error = %q, want %q", res.Error, want)
	}
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Fatalf("gave up after %v, before the connect timeout", el)
	}

	// With an attempt timeout below the connect timeout, the attempt's
	// deadline ends the connect: still a connect timeout.
	e := endpoint("full-short", "http://"+addr+"/in")
	e.Timeout = 200 * time.Millisecond
	res = send(t, tr, e, message())
	wantClass(t, res, courier.ClassConnectTimeout)
}
