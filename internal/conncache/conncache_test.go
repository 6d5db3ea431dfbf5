package conncache

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// conn is a connection made by a dialer.
type conn struct {
	id     int64
	url    string
	once   sync.Once
	closed chan struct{}
}

func (c *conn) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// dialer makes conns and counts them.
type dialer struct{ dials atomic.Int64 }

func (d *dialer) dial(url string) func() (*conn, error) {
	return func() (*conn, error) {
		return &conn{id: d.dials.Add(1), url: url, closed: make(chan struct{})}, nil
	}
}

// closeConn closes c; as the clients' closes do, it takes a second call.
func closeConn(c *conn) { c.once.Do(func() { close(c.closed) }) }

// live is the fresh func of the tests: open and still for url.
func live(url string) func(*conn) bool {
	return func(c *conn) bool { return c.url == url && !c.isClosed() }
}

// fixture is a Cache of the tests with the dialer that fills it.
type fixture struct {
	*Cache[*conn]
	dialer
}

func newFixture() *fixture { return &fixture{Cache: New(closeConn)} }

// mustGet returns the connection of key as Get does, and fails the test
// when Get fails.
func (f *fixture) mustGet(t *testing.T, key string, fresh func(*conn) bool, dial func() (*conn, error)) *conn {
	t.Helper()
	c, err := f.Get(key, fresh, dial)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return c
}

// get returns the connection of key, fit while it is open and to url, and
// dials url when there is none.
func (f *fixture) get(t *testing.T, key, url string) *conn {
	t.Helper()
	return f.mustGet(t, key, live(url), f.dial(url))
}

// waitClosed fails unless c gets closed soon: the cache closes the
// connections it lets go of in the background.
func waitClosed(t *testing.T, c *conn) {
	t.Helper()
	select {
	case <-c.closed:
	case <-time.After(5 * time.Second):
		t.Fatalf("connection %d was not closed", c.id)
	}
}

func TestGetKeepsOneConnectionPerKey(t *testing.T) {
	t.Parallel()
	f := newFixture()
	a := f.get(t, "a", "u1")
	if got := f.get(t, "a", "u1"); got != a {
		t.Fatalf("second get dialled anew: %d, want %d", got.id, a.id)
	}
	b := f.get(t, "b", "u1")
	if b == a {
		t.Fatal("two keys share a connection")
	}
	if got := f.dials.Load(); got != 2 {
		t.Fatalf("%d dials, want 2", got)
	}
}

func TestGetReplacesAConnectionThatIsNotFresh(t *testing.T) {
	t.Parallel()
	f := newFixture()
	old := f.get(t, "a", "u1")

	// The endpoint's URL changed.
	next := f.get(t, "a", "u2")
	if next == old || next.url != "u2" {
		t.Fatalf("got connection %d to %s, want a new one to u2", next.id, next.url)
	}
	waitClosed(t, old)

	// The connection died.
	closeConn(next)
	if got := f.get(t, "a", "u2"); got == next {
		t.Fatal("a closed connection was handed out")
	}
}

func TestGetKeepsNothingWhenTheDialFails(t *testing.T) {
	t.Parallel()
	f := newFixture()
	old := f.get(t, "a", "u1")
	refused := errors.New("connection refused")
	c, err := f.Get("a", live("u2"), func() (*conn, error) { return &conn{}, refused })
	if c != nil || !errors.Is(err, refused) {
		t.Fatalf("got %v, %v; want nil and the dial's error", c, err)
	}
	waitClosed(t, old)
	if got := f.get(t, "a", "u2"); got.url != "u2" {
		t.Fatalf("after a failed dial: connection to %s", got.url)
	}
}

func TestDrop(t *testing.T) {
	t.Parallel()
	f := newFixture()
	kept := f.get(t, "a", "u1")

	// A connection that is no longer the one kept is closed, and the kept
	// one stays.
	stale := &conn{id: -1, closed: make(chan struct{})}
	f.Drop("a", stale)
	waitClosed(t, stale)
	if got := f.get(t, "a", "u1"); got != kept {
		t.Fatal("dropping another connection lost the kept one")
	}

	f.Drop("a", kept)
	waitClosed(t, kept)
	if got := f.mustGet(t, "a", func(*conn) bool { return true }, f.dial("u1")); got == kept {
		t.Fatal("a dropped connection was handed out again")
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	f := newFixture()
	a := f.get(t, "a", "u1")
	b := f.get(t, "b", "u1")
	f.Close()
	if !a.isClosed() || !b.isClosed() {
		t.Fatal("Close returned before closing every connection")
	}
	// The Cache stays usable, and never hands out what it closed, even to
	// a fresh func that would take it.
	if got := f.mustGet(t, "a", func(*conn) bool { return true }, f.dial("u1")); got == a || got.isClosed() {
		t.Fatal("Get after Close handed out a closed connection")
	}
}

// TestDialsOfAKeyWaitForEachOther: concurrent attempts for one endpoint
// share one dial, and a slow dial holds up its own endpoint only.
func TestDialsOfAKeyWaitForEachOther(t *testing.T) {
	t.Parallel()
	f := newFixture()
	release := make(chan struct{})
	entered := make(chan struct{})
	slow := func() (*conn, error) {
		close(entered)
		<-release
		return f.dial("u1")()
	}
	const n = 20
	got := make(chan *conn, n)
	go func() {
		c, _ := f.Get("slow", live("u1"), slow)
		got <- c
	}()
	<-entered
	var wg sync.WaitGroup
	for range n - 1 {
		wg.Go(func() {
			c, _ := f.Get("slow", live("u1"), f.dial("u1"))
			got <- c
		})
	}

	// Another endpoint is not held up by the slow one.
	done := make(chan struct{})
	go func() {
		f.get(t, "quick", "u1")
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a slow dial held up another endpoint")
	}

	close(release)
	wg.Wait()
	first := <-got
	for range n - 1 {
		if c := <-got; c != first {
			t.Fatalf("connections %d and %d for one endpoint", first.id, c.id)
		}
	}
	if got := f.dials.Load(); got != 2 {
		t.Fatalf("%d dials, want 2 (one per endpoint)", got)
	}
}

// TestCloseWaitsForADial: a connection dialled while Close runs is closed
// too, not left open in a slot the Cache has forgotten.
func TestCloseWaitsForADial(t *testing.T) {
	t.Parallel()
	f := newFixture()
	release := make(chan struct{})
	entered := make(chan struct{})
	dialled := make(chan *conn, 1)
	go func() {
		c, _ := f.Get("a", live("u1"), func() (*conn, error) {
			close(entered)
			<-release
			return f.dial("u1")()
		})
		dialled <- c
	}()
	<-entered
	closed := make(chan struct{})
	go func() {
		f.Close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("Close returned while a dial was under way")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-closed
	if c := <-dialled; !c.isClosed() {
		t.Fatal("the connection dialled during Close stayed open")
	}
}

// TestConcurrentUse runs Get, Drop and Close together, for the race
// detector, and checks that every connection but the kept ones is closed.
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var all []*conn
	f := newFixture()
	dial := func(url string) func() (*conn, error) {
		return func() (*conn, error) {
			c, err := f.dial(url)()
			mu.Lock()
			all = append(all, c)
			mu.Unlock()
			return c, err
		}
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				key := fmt.Sprint("e", i%3)
				url := fmt.Sprint("u", (g+i)%2)
				c, err := f.Get(key, live(url), dial(url))
				if err != nil {
					t.Error(err)
					return
				}
				switch i % 17 {
				case 0:
					f.Drop(key, c)
				case 16:
					f.Close()
				}
			}
		})
	}
	wg.Wait()
	f.Close()
	mu.Lock()
	defer mu.Unlock()
	for _, c := range all {
		waitClosed(t, c)
	}
	if len(all) < 3 {
		t.Fatalf("%d dials", len(all))
	}
}
