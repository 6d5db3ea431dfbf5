package http

import (
	"errors"
	"io"
	"net"
	"testing"
)

// exchange sends a request on c and reads the first bytes of the answer
// the peer gives, as the HTTP client does before it pools a connection
// whose answer has no body.
func exchange(t *testing.T, c *trackedConn, peer net.Conn, answer string) {
	t.Helper()
	go func() {
		buf := make([]byte, 64)
		peer.Read(buf)
		io.WriteString(peer, answer)
	}()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
}

// A request that finds a connection in the pool before the answer it
// carried is judged waits for the judgement: a connection that answered
// 101 carries it nowhere, one that answered 204 carries it on.
func TestRequestWaitsForTheJudgementOfTheLastAnswer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		answer string
		reuse  bool
	}{
		{"HTTP/1.1 101 Switching Protocols\r\n\r\n", false},
		{"HTTP/1.1 204 No Content\r\n\r\n", true},
	} {
		client, peer := net.Pipe()
		t.Cleanup(func() { client.Close(); peer.Close() })
		c := &trackedConn{Conn: client, st: newConnState(client, nil)}
		exchange(t, c, peer, tc.answer)

		wrote := make(chan error, 1)
		go func() {
			_, err := io.WriteString(c, "POST /next HTTP/1.1\r\n\r\n")
			wrote <- err
		}()
		got := make(chan string, 1)
		go func() {
			buf := make([]byte, 64)
			n, _ := peer.Read(buf)
			got <- string(buf[:n])
		}()
		c.st.judge(tc.reuse)
		err := <-wrote
		if tc.reuse {
			if err != nil {
				t.Fatalf("after %q: the next request failed: %v", tc.answer, err)
			}
			if req := <-got; req != "POST /next HTTP/1.1\r\n\r\n" {
				t.Fatalf("after %q: the peer read %q", tc.answer, req)
			}
			continue
		}
		if !errors.Is(err, errRetired) {
			t.Fatalf("after %q: the next request met %v, want %v", tc.answer, err, errRetired)
		}
		if !c.st.isRetired() {
			t.Fatalf("after %q: the connection is not retired", tc.answer)
		}
		if req := <-got; req != "" {
			t.Fatalf("after %q: the peer read %q", tc.answer, req)
		}
	}
}
