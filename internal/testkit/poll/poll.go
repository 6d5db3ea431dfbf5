// Package poll waits in tests for a condition that another goroutine or
// process brings about, with a deadline generous enough for a loaded
// machine, instead of sleeping for a guessed time.
package poll

import (
	"testing"
	"time"
)

// Within is how long Wait and Until wait for their condition.
const Within = 30 * time.Second

// Wait calls cond every few milliseconds until it holds, and reports
// whether it held within Within; a test that has more to say of a
// timeout than Until does calls Wait.
func Wait(cond func() bool) bool {
	deadline := time.Now().Add(Within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// Until waits as Wait does, and fails the test, naming what it waited
// for, if cond does not hold within Within.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !Wait(cond) {
		t.Fatalf("timed out after %v waiting for %s", Within, what)
	}
}
