package engine

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	courier "github.com/courier-gw/courier"
)

// eventTimeout bounds the recording of one batch of events, which runs
// beside the work that caused them.
const eventTimeout = 10 * time.Second

// maxLagEvents bounds the route.lagging events one look records; the
// others are recorded by the next looks.
const maxLagEvents = 100

// maxEventBatch bounds the events one store transaction records (on
// PostgreSQL, each subject of a batch takes a lock of its own, from a lock
// table all of the server's sessions share).
const maxEventBatch = 200

// maxQueuedEvents bounds the events waiting for their batch: past it an
// event is logged and dropped, so that events never hold up delivery nor
// grow without end while the store is slow or away.
const maxQueuedEvents = 100_000

// Event records an operational event and, as the alerts' rate limit
// allows, sends its notices to the alerts' notify endpoints, and to the
// alert targets of the tenant whose endpoint or route it is about. It
// returns at once: the event waits for the next batch of events, which is written
// in one store transaction as soon as the one being written ends (at once
// when none is), in the order the events came. An event another node
// recorded already (the same transition, the same id) is not recorded or
// sent again. A notify endpoint the topology lacks, or that cannot take
// notices, is logged and left out: with the topology in the store it is
// only known now. Failures are logged: an event never holds up delivery.
func (e *Engine) Event(ev courier.Event) {
	if !e.events.add(ev, e.recordEvents) {
		e.logger.Warn("too many operational events wait to be recorded; this one is dropped", "event", ev.Kind, "subject", ev.Subject, "waiting", maxQueuedEvents)
	}
}

// recordEvents records a batch of events in one store transaction, then
// sends the notices of those recorded now and starts the re-drives of
// the recoveries among them.
func (e *Engine) recordEvents(batch []courier.Event) {
	ctx, cancel := context.WithTimeout(e.life, eventTimeout)
	defer cancel()
	a := e.opts.Alerts
	t := e.topology.Load()
	// usable says whether a notify endpoint can take notices, told once a
	// batch when it cannot.
	checked := map[string]bool{}
	usable := func(name string) bool {
		ok, seen := checked[name]
		if seen {
			return ok
		}
		switch ep := t.Endpoints[name]; {
		case ep == nil:
			e.logger.Warn("alerts: a notify endpoint is not defined; its notices are not sent", "endpoint", name)
		case ep.Transport != courier.TransportHTTP && ep.Transport != courier.TransportSMTP:
			e.logger.Warn("alerts: a notify endpoint is neither http nor smtp; its notices are not sent", "endpoint", name, "transport", ep.Transport)
		default:
			ok = true
		}
		checked[name] = ok
		return ok
	}
	var notify []string
	for _, name := range a.Notify {
		if usable(name) {
			notify = append(notify, name)
		}
	}
	// The tenants' alert targets are checked here too, so that the
	// decisions below only read what was checked.
	for _, ev := range batch {
		if ta := t.TenantAlerts(ev); ta != nil {
			for _, name := range ta.Notify {
				usable(name)
			}
		}
	}
	// The server's notify endpoints hear of every event, a tenant's alert
	// targets of its own endpoints' and routes' (Topology.TenantAlerts),
	// each as its own rate limit allows.
	sentTo := map[string]bool{}
	var mu sync.Mutex
	recorded, err := e.store.RecordEvents(ctx, batch, time.Hour, func(ev courier.Event, recent []courier.Event) (courier.Event, []*courier.Message) {
		var to []string
		if len(notify) > 0 && a.Allow(ev, recent) {
			to = append(to, notify...)
		}
		if ta := t.TenantAlerts(ev); ta.Allow(ev, recent) {
			for _, name := range ta.Notify {
				if !slices.Contains(to, name) && checked[name] {
					to = append(to, name)
				}
			}
		}
		ev.Notified = len(to) > 0
		if !ev.Notified {
			return ev, nil
		}
		mu.Lock()
		for _, name := range to {
			sentTo[name] = true
		}
		mu.Unlock()
		return ev, a.Notices(ev, to)
	})
	if err != nil {
		for _, ev := range batch {
			e.logger.Warn("could not record an operational event", "event", ev.Kind, "subject", ev.Subject, "err", err)
		}
	}
	for _, rec := range recorded {
		switch {
		case rec.Notified:
			e.logger.Info("operational event; notices sent", "event", rec.Kind, "subject", rec.Subject)
		case len(notify) > 0 || t.TenantAlerts(rec) != nil:
			e.logger.Info("operational event; its notices are held back by max_per_hour", "event", rec.Kind, "subject", rec.Subject)
		default:
			e.logger.Info("operational event", "event", rec.Kind, "subject", rec.Subject)
		}
	}
	if len(sentTo) > 0 {
		now := e.clock.Now()
		for name := range sentTo {
			e.lanes.due(courier.NoticeRoute(name), now, now)
		}
		e.nudge()
	}
	// A recovery starts its re-drives whether or not this node recorded
	// it first: only the node whose write made the change has its event.
	for _, ev := range batch {
		if ev.Kind == courier.EventEndpointRecovered {
			e.redrive(ev.Subject, ev.At)
		}
	}
}

// healthEvent records the event of an endpoint's health change, if it is
// one; reason says what caused it. A recovery starts the re-drives of the
// endpoint's routes that have one once its event is written. Only the node
// whose write made the change calls it, once per transition.
func (e *Engine) healthEvent(name string, before, after courier.EndpointHealth, reason string) {
	if ev, ok := courier.HealthEvent(name, before, after, reason); ok {
		e.Event(ev)
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
// notices) follow, in the order of the switches.
func (e *Engine) HealthSwitched(name string, before, after courier.EndpointHealth, who string) {
	after.Endpoint = name
	e.noteHealth(after)
	reason := "switched on by " + who
	if after.State == courier.HealthOff {
		reason = "switched off by " + who
	}
	e.healthEvent(name, before, after, reason)
}

// eventBatcher gathers the events that come while a batch is being
// written into the next batch: one writer at a time, started by the first
// event after an idle spell, with no waiting for more to come.
type eventBatcher struct {
	mu      sync.Mutex
	queue   []courier.Event
	writing bool
	idle    *sync.Cond // signalled when the writer ends
}

// add queues ev for write, which records a batch; it reports false, and
// queues nothing, when maxQueuedEvents wait already.
func (b *eventBatcher) add(ev courier.Event, write func([]courier.Event)) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) >= maxQueuedEvents {
		return false
	}
	b.queue = append(b.queue, ev)
	if !b.writing {
		b.writing = true
		go b.run(write)
	}
	return true
}

func (b *eventBatcher) run(write func([]courier.Event)) {
	for {
		b.mu.Lock()
		if len(b.queue) == 0 {
			b.writing = false
			if b.idle != nil {
				b.idle.Broadcast()
			}
			b.mu.Unlock()
			return
		}
		n := min(len(b.queue), maxEventBatch)
		batch := b.queue[:n:n]
		b.queue = b.queue[n:]
		if len(b.queue) == 0 {
			b.queue = nil
		}
		b.mu.Unlock()
		write(batch)
	}
}

// wait waits until every event added is written.
func (b *eventBatcher) wait() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.idle == nil {
		b.idle = sync.NewCond(&b.mu)
	}
	for b.writing {
		b.idle.Wait()
	}
}

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
