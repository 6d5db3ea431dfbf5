package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	courier "github.com/courier-gw/courier"
)

// eventTimeout bounds the recording of one event, which runs beside the
// work that caused it.
const eventTimeout = 10 * time.Second

// maxLagEvents bounds the route.lagging events one look records; the
// others are recorded by the next looks.
const maxLagEvents = 100

// Event records an operational event and, as the alerts' rate limit
// allows, sends its notices to the alerts' notify endpoints, in one store
// transaction. An event another node recorded already (the same
// transition, the same id) is not recorded or sent again. A notify endpoint
// the topology lacks, or that cannot take notices, is logged and left out:
// with the topology in the store it is only known now. Failures are
// logged: an event never holds up delivery.
func (e *Engine) Event(ev courier.Event) {
	ctx, cancel := context.WithTimeout(e.life, eventTimeout)
	defer cancel()
	a := e.opts.Alerts
	t := e.topology.Load()
	var notify []string
	for _, name := range a.Notify {
		switch ep := t.Endpoints[name]; {
		case ep == nil:
			e.logger.Warn("alerts: a notify endpoint is not defined; its notice is not sent", "endpoint", name, "event", ev.Kind, "subject", ev.Subject)
		case ep.Transport != courier.TransportHTTP && ep.Transport != courier.TransportSMTP:
			e.logger.Warn("alerts: a notify endpoint is neither http nor smtp; its notice is not sent", "endpoint", name, "transport", ep.Transport)
		default:
			notify = append(notify, name)
		}
	}
	rec, created, err := e.store.RecordEvent(ctx, ev, ev.At.Add(-time.Hour), func(recent []courier.Event) (courier.Event, []*courier.Message) {
		ev.Notified = len(notify) > 0 && a.Allow(ev, recent)
		if !ev.Notified {
			return ev, nil
		}
		return ev, a.Notices(ev, notify)
	})
	if err != nil {
		e.logger.Warn("could not record an operational event", "event", ev.Kind, "subject", ev.Subject, "err", err)
		return
	}
	if !created {
		return
	}
	switch {
	case rec.Notified:
		now := e.clock.Now()
		for _, name := range notify {
			e.lanes.due(courier.NoticeRoute(name), now, now)
		}
		e.nudge()
		e.logger.Info("operational event; notices sent", "event", rec.Kind, "subject", rec.Subject, "notify", notify)
	case len(notify) > 0:
		e.logger.Info("operational event; its notices are held back by alerts.max_per_hour", "event", rec.Kind, "subject", rec.Subject)
	default:
		e.logger.Info("operational event", "event", rec.Kind, "subject", rec.Subject)
	}
}

// healthEvent records the event of an endpoint's health change, if it is
// one; reason says what caused it. A recovery starts the re-drives of the
// endpoint's routes that have one. Only the node whose write made the
// change calls it, once per transition.
func (e *Engine) healthEvent(name string, before, after courier.EndpointHealth, reason string) {
	if ev, ok := courier.HealthEvent(name, before, after, reason); ok {
		e.Event(ev)
		if ev.Kind == courier.EventEndpointRecovered {
			e.redrive(name, ev.At)
		}
	}
}

// HealthSwitched takes in an operator's switch of an endpoint (off, or on
// again) that this node's API wrote, and records its event. The API reports
// it before it answers: from then on no attempt on the endpoint starts on
// this node while it is off (other nodes obey within healthMaxAge), and
// its held routes go as soon as it is on.
//
// The event is recorded beside the switch, not before its answer: a switch
// of ten thousand endpoints is one transaction, and its events (and their
// notices) follow, in the order of the switches of each endpoint.
func (e *Engine) HealthSwitched(name string, before, after courier.EndpointHealth, who string) {
	after.Endpoint = name
	e.noteHealth(after)
	reason := "switched on by " + who
	if after.State == courier.HealthOff {
		reason = "switched off by " + who
	}
	e.switchEvents.add(name, func() { e.healthEvent(name, before, after, reason) })
}

// switchEventWorkers bounds the switches' events recorded at once.
const switchEventWorkers = 8

// eventQueue records the events of switches in the background, those of
// one endpoint in the order of its switches, a few at a time.
type eventQueue struct {
	mu    sync.Mutex
	tail  map[string]chan struct{} // per endpoint, closed once its latest event is recorded
	slots chan struct{}
	wg    sync.WaitGroup
}

// add records an endpoint's event with record, after the endpoint's
// events added before.
func (q *eventQueue) add(endpoint string, record func()) {
	q.mu.Lock()
	if q.tail == nil {
		q.tail, q.slots = map[string]chan struct{}{}, make(chan struct{}, switchEventWorkers)
	}
	prev, done, slots := q.tail[endpoint], make(chan struct{}), q.slots
	q.tail[endpoint] = done
	q.wg.Add(1)
	q.mu.Unlock()
	go func() {
		defer q.wg.Done()
		if prev != nil {
			<-prev
		}
		slots <- struct{}{}
		record()
		<-slots
		close(done)
		q.mu.Lock()
		if q.tail[endpoint] == done {
			delete(q.tail, endpoint)
		}
		q.mu.Unlock()
	}()
}

// wait waits until every event added is recorded.
func (q *eventQueue) wait() { q.wg.Wait() }

// dueSeen is the routes with claimable messages as the last sweep found
// them, and when; the look for lagging routes reads it, and so costs the
// store nothing of its own.
type dueSeen struct {
	at     time.Time
	routes []courier.RouteDue
}

// lagWatch remembers which routes the last look found lagging, so that a
// route's lag is recorded when it begins, not at every look.
type lagWatch struct {
	seen    atomic.Pointer[dueSeen]
	lagging map[string]bool // the look's own; only lagLoop uses it
}

// lagInterval is how often lagging routes are looked for: a quarter of
// oldest_due, at least the poll interval and at most a minute.
func (e *Engine) lagInterval() time.Duration {
	d := e.opts.Alerts.OldestDue
	if d <= 0 {
		d = courier.DefaultOldestDue
	}
	return min(max(d/4, e.opts.PollInterval), time.Minute)
}

// checkLag records route.lagging for each route whose oldest due message,
// as the last sweep saw it, has waited longer than oldest_due and that did
// not lag at the look before: at most maxLagEvents at a look.
func (e *Engine) checkLag(context.Context) error {
	seen := e.lag.seen.Load()
	if seen == nil {
		return nil
	}
	// The lag as the sweep saw it: a route delivered since is not taken
	// for one still waiting.
	t, now := e.topology.Load(), seen.at
	lagging := map[string]bool{}
	recorded := 0
	for _, d := range seen.routes {
		if t.Route(d.Route) == nil || !e.opts.Alerts.Lagging(d.Route, d.At, now) {
			continue
		}
		if e.lag.lagging[d.Route] {
			lagging[d.Route] = true
			continue
		}
		if recorded == maxLagEvents {
			continue // not marked: the next look records it
		}
		recorded++
		lagging[d.Route] = true
		e.Event(courier.LagEvent(d.Route, d.At, now))
	}
	e.lag.lagging = lagging
	return nil
}
