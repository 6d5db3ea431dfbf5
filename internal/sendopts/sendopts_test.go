package sendopts

import (
	"log/slog"
	"testing"
	"time"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/clocktest"
)

func TestSetDefaults(t *testing.T) {
	t.Parallel()
	var logger *slog.Logger
	var c courier.Clock
	timeout, connect := time.Duration(0), -time.Second
	Common{Logger: &logger, Clock: &c, DefaultTimeout: &timeout, ConnectTimeout: &connect}.SetDefaults()
	if logger != slog.Default() || c != (courier.SystemClock{}) || timeout != DefaultTimeout || connect != DefaultConnectTimeout {
		t.Errorf("unset options became %v, %v, %v, %v", logger, c, timeout, connect)
	}

	// Set options stay as they are, and options a transport lacks are left
	// alone.
	own, ownClock := slog.New(slog.DiscardHandler), clocktest.New(time.Time{})
	logger, c, timeout = own, ownClock, time.Minute
	Common{Logger: &logger, Clock: &c, DefaultTimeout: &timeout}.SetDefaults()
	if logger != own || c != courier.Clock(ownClock) || timeout != time.Minute {
		t.Errorf("set options became %v, %v, %v", logger, c, timeout)
	}
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		own, want time.Duration
	}{
		{5 * time.Second, 5 * time.Second},
		{0, time.Minute},
		{-time.Second, time.Minute},
	} {
		e := courier.NewEndpoint("e", courier.TransportHTTP)
		e.Timeout = tc.own
		if got := Timeout(e, time.Minute); got != tc.want {
			t.Errorf("Timeout with the endpoint's %v = %v, want %v", tc.own, got, tc.want)
		}
	}
}

func TestUnsendable(t *testing.T) {
	t.Parallel()
	m, e := &courier.Message{ID: "m"}, courier.NewEndpoint("e", courier.TransportHTTP)
	for _, tc := range []struct {
		name string
		d    courier.Delivery
		want bool
	}{
		{"both", courier.Delivery{Message: m, Endpoint: e}, false},
		{"no message", courier.Delivery{Endpoint: e}, true},
		{"no endpoint", courier.Delivery{Message: m}, true},
	} {
		got := Unsendable(tc.d)
		if (got != nil) != tc.want {
			t.Errorf("%s: Unsendable = %v, want a result: %v", tc.name, got, tc.want)
		}
		if got != nil && got.Class != courier.ClassTransport {
			t.Errorf("%s: class %q, want %q", tc.name, got.Class, courier.ClassTransport)
		}
	}
}
