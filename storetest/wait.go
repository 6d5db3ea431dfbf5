package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

// WaitActions waits until s holds n actions on subject, for an action
// recorded after its caller was answered (a claim-check fetch is recorded
// once its last byte is written, which the fetcher may read first), and
// returns them; it fails t if they are not there within ten seconds.
func WaitActions(t testing.TB, s courier.Store, subject string, n int) []courier.Action {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		actions, err := s.Actions(context.Background(), subject)
		if err != nil {
			t.Fatal(err)
		}
		if len(actions) >= n {
			return actions
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d actions on %s after ten seconds, want %d", len(actions), subject, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitNoError waits for the goroutines of wg and fails t with the first
// error they sent to errs that is not nil; it closes errs.
func waitNoError(t *testing.T, wg *sync.WaitGroup, errs chan error) {
	t.Helper()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
