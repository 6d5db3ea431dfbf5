// Package natstest gives tests a JetStream stream of their own on the NATS
// server of COURIER_TEST_NATS.
package natstest

import (
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/courier-gw/courier/internal/testkit/testenv"
)

// Stream is a stream of one test's own, on a subject of its own.
type Stream struct {
	jetstream.Stream
	URL     string // the server's, from COURIER_TEST_NATS
	Name    string
	Subject string              // the one subject the stream takes
	JS      jetstream.JetStream // the test's own connection
}

// NewStream connects to the server and creates a stream, deleted when the
// test ends; cfg gives its settings but the name and subjects. The test
// skips without a server (fails in CI).
func NewStream(t testing.TB, cfg jetstream.StreamConfig) *Stream {
	t.Helper()
	u := testenv.NATS.URL(t)
	nc, err := nats.Connect(u)
	if err != nil {
		t.Fatalf("connect to the server: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	id := Unique()
	s := &Stream{URL: u, Name: "COURIER_TEST_" + id, Subject: "courier.test." + id, JS: js}
	cfg.Name, cfg.Subjects = s.Name, []string{s.Subject}
	s.Stream = testenv.CreateStream(t, js, cfg)
	return s
}

// Unique returns a random id, for names that tests running at once on one
// server do not share.
func Unique() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
