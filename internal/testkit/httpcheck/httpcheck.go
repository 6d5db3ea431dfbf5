// Package httpcheck sends a test's HTTP requests and reads their whole
// answers, failing the test when a request gets no answer or, where the
// test says which, an answer of another status.
package httpcheck

import (
	"io"
	"net/http"
	"testing"
)

// Do sends req with client (http.DefaultClient when nil) and reads the
// whole answer: its status, body and headers.
func Do(t testing.TB, client *http.Client, req *http.Request) (int, []byte, http.Header) {
	t.Helper()
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", req.Method, req.URL, err)
	}
	return resp.StatusCode, body, resp.Header
}

// Get reads the whole answer to a GET of url.
func Get(t testing.TB, url string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return Do(t, nil, req)
}

// Expect sends req as Do does and fails the test unless the answer has the
// status want; it returns the answer's body.
func Expect(t testing.TB, client *http.Client, req *http.Request, want int) []byte {
	t.Helper()
	status, body, _ := Do(t, client, req)
	if status != want {
		t.Fatalf("%s %s: %d, want %d: %s", req.Method, req.URL, status, want, body)
	}
	return body
}
