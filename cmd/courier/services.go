package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/courier-gw/courier/internal/startstop"
)

// part is a service of the server with what an operator should know when
// it does not stop in time.
type part struct {
	name string
	svc  startstop.Service
	late string // what it means that the stop ran out of time
	// share is the fraction of the stop's time kept for this part: the
	// parts stopped before it are cut off that long before the deadline,
	// so that one of them that overruns leaves it that much time.
	share float64
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

// stop stops every part, in reverse order, within the deadline of ctx,
// each part within what is left of it once the shares of the parts still
// to stop are set aside. Every part is stopped whatever the others did;
// each failure is logged with what it means.
func (ps parts) stop(ctx context.Context, logger *slog.Logger) {
	deadline, bounded := ctx.Deadline()
	total := time.Until(deadline)
	var kept time.Duration // the shares of the parts stopped after ps[i]
	for i := range ps {
		kept += time.Duration(ps[i].share * float64(total))
	}
	for i := len(ps) - 1; i >= 0; i-- {
		p := ps[i]
		kept -= time.Duration(p.share * float64(total))
		pctx, cancel := ctx, context.CancelFunc(func() {})
		if bounded && kept > 0 {
			pctx, cancel = context.WithDeadline(ctx, deadline.Add(-kept))
		}
		logger.Debug("stopping", "part", p.name)
		if err := p.svc.Stop(pctx); err != nil {
			logger.Warn(p.name+" did not stop in time; "+p.late, "err", err)
		}
		cancel()
	}
}

// loop is a background loop that ends with its context and has nothing
// to wait for, such as a listener: Stop ends its context.
type loop struct {
	startstop.Base
	run func(ctx context.Context)
}

func (l *loop) Start(ctx context.Context) error {
	run, ok := l.StartInit(ctx)
	if !ok {
		return ctx.Err()
	}
	l.run(run.Ctx)
	context.AfterFunc(run.Ctx, run.Stopped)
	return nil
}

// httpService serves the API and dashboard on a listener; a failure of
// the server after the start is sent on failed.
type httpService struct {
	startstop.Base
	srv    *http.Server
	ln     net.Listener
	tls    bool
	failed chan error // made with the service, one error long
}

func (h *httpService) Start(ctx context.Context) error {
	return h.StartWork(ctx, func(context.Context) {
		var err error
		if h.tls {
			err = h.srv.ServeTLS(h.ln, "", "")
		} else {
			err = h.srv.Serve(h.ln)
		}
		if !errors.Is(err, http.ErrServerClosed) {
			select {
			case h.failed <- err:
			default: // told already
			}
		}
	})
}

// Stop stops taking requests and lets those under way finish until ctx
// ends; then they are cut off. A server once stopped serves no more.
func (h *httpService) Stop(ctx context.Context) error {
	// Shut down even when Serve has failed by itself: the connections it
	// had are drained.
	stopped, _, running := h.StopInit()
	err := h.srv.Shutdown(ctx)
	if err != nil {
		h.srv.Close()
	}
	if running {
		<-stopped // Serve returns as soon as the shutdown begins
	}
	return err
}

// engineShare is the fraction of shutdown_timeout kept for the engine, the
// last part to stop: what the other parts leave of theirs is its too.
const engineShare = 0.5
