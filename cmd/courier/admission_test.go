package main

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/config"
)

// TestIngestAdmissionDerived checks the bound on ingest in flight that
// the configuration leaves to the memory limit: a twelfth of it, and a
// message per KiB of that; what it gives is kept.
func TestIngestAdmissionDerived(t *testing.T) {
	old := debug.SetMemoryLimit(120 << 20)
	defer debug.SetMemoryLimit(old)
	if got, want := ingestAdmission(config.IngestInFlight{SenderShare: 0.5}), (api.Admission{MaxBytes: 10 << 20, MaxMessages: 10240, SenderShare: 0.5}); got != want {
		t.Errorf("derived: %+v, want %+v", got, want)
	}
	given := config.IngestInFlight{MaxBytes: 64 << 20, MaxMessages: 5, SenderShare: 1}
	if got, want := ingestAdmission(given), (api.Admission{MaxBytes: 64 << 20, MaxMessages: 5, SenderShare: 1}); got != want {
		t.Errorf("given: %+v, want %+v", got, want)
	}
	debug.SetMemoryLimit(math.MaxInt64) // GOMEMLIMIT=off
	if got := ingestAdmission(config.IngestInFlight{SenderShare: 0.5}); got.MaxBytes != defaultMemoryLimit/12 {
		t.Errorf("without a memory limit: %+v, want max bytes %d", got, defaultMemoryLimit/12)
	}
}
