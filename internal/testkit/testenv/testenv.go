// Package testenv tells tests where the services they need (PostgreSQL,
// RabbitMQ, NATS, a browser) are. A test without its service skips, unless CI is set:
// there a missing service is a failure, so that CI never passes by skipping.
package testenv

import (
	"net/url"
	"os"
	"os/exec"
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

// ServiceVar is the environment variable that names a service, with an
// example value for the message of a test that skips without it.
type ServiceVar struct{ Name, Example string }

// The services of courier's tests.
var (
	AMQP     = ServiceVar{"COURIER_TEST_AMQP", "amqp://guest:guest@127.0.0.1:5672/"}
	NATS     = ServiceVar{"COURIER_TEST_NATS", "nats://127.0.0.1:4222"}
	Postgres = ServiceVar{"COURIER_TEST_POSTGRES", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"}
	// S3 is an S3-compatible service, its access and secret key given as
	// the URL's user and password.
	S3 = ServiceVar{"COURIER_TEST_S3", "http://courier:courier-secret@127.0.0.1:7070"}
)

// S3Access returns the endpoint of the S3 service (its URL without the
// keys) and the access and secret key in it.
func S3Access(t testing.TB) (endpoint, accessKey, secretKey string) {
	t.Helper()
	u, err := url.Parse(S3.URL(t))
	if err != nil || u.User == nil {
		t.Fatalf("%s must be http://ACCESS_KEY:SECRET_KEY@host:port (%v)", S3.Name, err)
	}
	secretKey, _ = u.User.Password()
	accessKey = u.User.Username()
	u.User = nil
	return u.String(), accessKey, secretKey
}

// URL returns the service's address, as Service does.
func (v ServiceVar) URL(t testing.TB) string {
	t.Helper()
	return Service(t, v.Name, v.Example)
}

// Chromium returns the path of a Chromium (or Chrome) binary for browser
// tests. Without one the test skips, saying how to install it, or fails
// when the variable CI is set.
func Chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("COURIER_TEST_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no chromium found: install it (Debian: apt-get install chromium) or set COURIER_TEST_CHROMIUM to a Chrome binary to run"
	if os.Getenv("CI") != "" {
		t.Fatal(msg + " (CI is set, so a missing browser fails instead of skipping)")
	}
	t.Skip(msg)
	return ""
}

// Tinyproxy returns the path of the tinyproxy binary that COURIER_TEST_TINYPROXY
// names, for the tests of outbound proxies. Without it the test skips,
// saying how to run it, or fails when the variable CI is set.
func Tinyproxy(t testing.TB) string {
	t.Helper()
	return Service(t, "COURIER_TEST_TINYPROXY", "/usr/bin/tinyproxy (Debian: apt-get install tinyproxy)")
}
