package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
)

// service is a part of the server that works in the background. Start
// begins its work and returns; Stop ends it, letting the work under way
// finish until ctx ends, and then cutting it off.
type service interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// part is a service of the server with what an operator should know when
// it does not stop in time.
type part struct {
	name string
	svc  service
	late string // what it means that the stop ran out of time
}

// parts are the services of the server in the order they start; they stop
// in the reverse order, so that nothing stops before what feeds it.
type parts []part

// start starts the parts in order, up to the first that fails; it returns
// those it started, which the caller stops again.
func (ps parts) start(ctx context.Context) (started parts, err error) {
	for i, p := range ps {
		if err := p.svc.Start(ctx); err != nil {
			return ps[:i], fmt.Errorf("start %s: %w", p.name, err)
		}
	}
	return ps, nil
}

// stop stops every part, in reverse order, all within the one deadline of
// ctx. Every part is stopped whatever the others did; each failure is
// logged with what it means.
func (ps parts) stop(ctx context.Context, logger *slog.Logger) {
	for i := len(ps) - 1; i >= 0; i-- {
		p := ps[i]
		logger.Debug("stopping", "part", p.name)
		if err := p.svc.Stop(ctx); err != nil {
			logger.Warn(p.name+" did not stop in time; "+p.late, "err", err)
		}
	}
}

// loop is a background loop that ends with its context and has nothing
// to wait for, such as a listener: Stop ends its context.
type loop struct {
	run    func(ctx context.Context)
	cancel context.CancelFunc
}

func (l *loop) Start(ctx context.Context) error {
	ctx, l.cancel = context.WithCancel(ctx)
	l.run(ctx)
	return nil
}

func (l *loop) Stop(context.Context) error {
	if l.cancel != nil {
		l.cancel()
	}
	return nil
}

// httpService serves the API and dashboard on a listener; a failure of
// the server after the start is sent on failed.
type httpService struct {
	srv    *http.Server
	ln     net.Listener
	tls    bool
	failed chan error
}

func (h *httpService) Start(context.Context) error {
	h.failed = make(chan error, 1)
	go func() {
		var err error
		if h.tls {
			err = h.srv.ServeTLS(h.ln, "", "")
		} else {
			err = h.srv.Serve(h.ln)
		}
		if !errors.Is(err, http.ErrServerClosed) {
			h.failed <- err
		}
	}()
	return nil
}

// Stop stops taking requests and lets those under way finish until ctx
// ends; then they are cut off.
func (h *httpService) Stop(ctx context.Context) error {
	err := h.srv.Shutdown(ctx)
	if err != nil {
		h.srv.Close()
	}
	return err
}
