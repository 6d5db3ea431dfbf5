// Package testenv tells tests where the services they need (PostgreSQL,
// RabbitMQ, NATS) are. A test without its service skips, unless CI is set:
// there a missing service is a failure, so that CI never passes by skipping.
package testenv

import (
	"os"
	"testing"
)

// Service returns the address in the environment variable name, such as
// COURIER_TEST_AMQP. When it is unset the test skips with a message showing
// example as the value to set, or fails when the variable CI is set.
func Service(t testing.TB, name, example string) string {
	t.Helper()
	if v := os.Getenv(name); v != "" {
		return v
	}
	msg := "set " + name + "=" + example + " to run"
	if os.Getenv("CI") != "" {
		t.Fatal(msg + " (CI is set, so a missing service fails instead of skipping)")
	}
	t.Skip(msg)
	return ""
}
