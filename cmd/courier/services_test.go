package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/courier-gw/courier/internal/startstop"
	"github.com/courier-gw/courier/internal/testkit/startstoptest"
)

func TestLoopStartStopStress(t *testing.T) {
	l := &loop{run: func(ctx context.Context) {
		go func() { <-ctx.Done() }()
	}}
	startstoptest.Stress(t, l)
}

func TestHTTPServiceStartStopStress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &httpService{srv: &http.Server{Handler: http.NotFoundHandler()}, ln: ln, failed: make(chan error, 1)}
	startstoptest.Stress(t, h)
	select {
	case err := <-h.failed:
		t.Errorf("the server failed: %v", err)
	default:
	}
}

// overrun is a part that holds its stop until its context ends.
type overrun struct {
	startstop.Base
	deadline time.Time // of the context its Stop was given
}

func (o *overrun) Start(context.Context) error { return nil }

func (o *overrun) Stop(ctx context.Context) error {
	o.deadline, _ = ctx.Deadline()
	<-ctx.Done()
	return ctx.Err()
}

// drain is a part that records the context its Stop was given.
type drain struct {
	startstop.Base
	deadline time.Time
	err      error // the context's error when Stop was called
}

func (d *drain) Start(context.Context) error { return nil }

func (d *drain) Stop(ctx context.Context) error {
	d.deadline, _ = ctx.Deadline()
	d.err = ctx.Err()
	return nil
}

// A part stopped before the engine that overruns is cut off before the
// engine's share of the time: the engine is left that share to drain, not
// an expired context.
func TestStopLeavesTheEngineItsShare(t *testing.T) {
	const timeout = 20 * time.Second
	eng, late := &drain{}, &overrun{}
	ps := parts{
		{"the engine", eng, "", 0.9},
		{"receive locations", late, "", 0},
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	ps.stop(ctx, slog.New(slog.DiscardHandler))
	if eng.err != nil {
		t.Errorf("the engine was stopped with an expired context (%v)", eng.err)
	}
	if !eng.deadline.Equal(deadline) {
		t.Errorf("the engine's deadline is %v, want the stop's, %v", eng.deadline, deadline)
	}
	// The share is taken of the time left when the stop began, a little
	// less than the timeout.
	if kept := deadline.Sub(late.deadline); kept <= 0 || kept > 18*time.Second {
		t.Errorf("the part before the engine was cut off %v before the deadline, want up to 18s", kept)
	}
}
