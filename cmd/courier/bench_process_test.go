package main

import (
	"encoding/json"
	"os/exec"
	"testing"
)

// benchDeliverJSON runs `courier bench deliver` with args as a process and
// returns what it measured.
func benchDeliverJSON(t *testing.T, args ...string) deliverResult {
	t.Helper()
	cmd := exec.Command(courierBin, append([]string{"bench", "deliver", "--output", "json"}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bench deliver %v: %v\n%s", args, err, out)
	}
	var res deliverResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("bench deliver %v printed %q: %v", args, out, err)
	}
	return res
}

// The delivery benchmark runs its receiver in a process of its own, counts
// every message there, and tells the CPU each process spent per message.
func TestBenchDeliverWithReceiverProcess(t *testing.T) {
	res := benchDeliverJSON(t, "--messages", "2000", "--endpoints", "3")
	if res.Messages != 2000 || res.DeliverPerSec <= 0 {
		t.Fatalf("measured %+v", res)
	}
	if res.CourierCPUus <= 0 || res.ReceiverCPUus <= 0 {
		t.Errorf("CPU per message: courier %v µs, receiver %v µs; want both measured", res.CourierCPUus, res.ReceiverCPUus)
	}
}

// With endpoints switched off, the others are delivered and the messages of
// those that are off stay queued, every one.
func TestBenchDeliverHeld(t *testing.T) {
	res := benchDeliverJSON(t, "--messages", "2000", "--endpoints", "10", "--held", "2", "--held-share", "0.5")
	if res.HeldQueued != 1000 {
		t.Fatalf("%d messages left queued for the endpoints that are off, want 1000", res.HeldQueued)
	}
}
