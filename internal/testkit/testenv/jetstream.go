package testenv

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// streamStoreFailed is the server's code for "error creating store for
// stream"; the client library names no constant for it.
const streamStoreFailed jetstream.ErrorCode = 10049

// CreateStream creates a JetStream stream for a test and deletes it when
// the test ends. Tests of several packages create and delete streams on one
// server at once; when one deletes the last stream on disk while another
// creates one, the server can answer the create with "error creating store
// for stream" (its account directory was removed under it). That answer is
// tried again; any other fails the test.
func CreateStream(t testing.TB, js jetstream.JetStream, cfg jetstream.StreamConfig) jetstream.Stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var s jetstream.Stream
	var err error
	for try := 0; try < 5; try++ {
		s, err = js.CreateStream(ctx, cfg)
		var apiErr *jetstream.APIError
		if err == nil || !errors.As(err, &apiErr) || apiErr.ErrorCode != streamStoreFailed {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("create stream %s: %v", cfg.Name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, cfg.Name); err != nil {
			t.Errorf("delete stream %s: %v", cfg.Name, err)
		}
	})
	return s
}
