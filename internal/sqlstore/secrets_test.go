package sqlstore

import (
	"errors"
	"testing"
)

// A secret is loaded once; a failed load is not kept, so the next call
// asks again.
func TestSecretsLoadedOnce(t *testing.T) {
	var c Secrets
	loads := 0
	fail := true
	load := func() ([]byte, error) {
		loads++
		if fail {
			return nil, errors.New("database away")
		}
		return []byte("k"), nil
	}
	if _, err := c.Get("claims", load); err == nil {
		t.Fatal("a failed load gave a secret")
	}
	fail = false
	for range 3 {
		if v, err := c.Get("claims", load); err != nil || string(v) != "k" {
			t.Fatalf("Get: %q, %v", v, err)
		}
	}
	if loads != 2 {
		t.Fatalf("%d loads, want 2: the failed one and the first that worked", loads)
	}
}
