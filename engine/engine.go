// Package engine moves messages: it claims due ones as capacity frees, hands
// each to its endpoint's transport, writes the outcomes in batches, keeps
// endpoint health, pacing and leases, fires timers, and runs bulk operations
// and the retention purge. It uses the store only through courier.Store and
// decides through the root package's pure functions.
package engine

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/startstop"
)

// Options configure an Engine. Store, Topology and Senders are required.
type Options struct {
	Store    courier.Store
	Topology *courier.Topology
	Senders  map[courier.Transport]courier.Sender
	Clock    courier.Clock
	Logger   *slog.Logger

	// Workers bounds the attempts in flight on this node (default 256).
	Workers int
	// Owner names this node in leases (default host:pid).
	Owner string
	// LeaseSlack is added to the longest endpoint timeout of a route to make
	// the lease of its messages (default 10s; an attempt is cut off 5s after
	// its endpoint's timeout): a lease never lapses while its attempt can
	// still be running, and the messages of a node that died are taken up
	// soon after.
	LeaseSlack time.Duration
	// PollInterval is the longest the claimer sleeps without a wake-up
	// (default 1s), and how often the store is swept for due work that no
	// notice named, such as other nodes' retries (a sweep that takes long
	// spaces the next ones further).
	PollInterval time.Duration
	// RescueInterval is how often lapsed leases are looked for (default 5s).
	RescueInterval time.Duration
	// TimerInterval is how often due timers are looked for (default 1s).
	TimerInterval time.Duration
	// RescueAllOnStart treats every lease as lapsed at start. Right for a
	// store that only this process uses (SQLite): the leases it finds are
	// from a run that died.
	RescueAllOnStart bool
	// RandFunc returns a number in [0, 1) for jitter (default math/rand).
	RandFunc func() float64
	// Limits holds max_concurrency, min_interval and rate for every node of
	// a store that several share; nil when this node is the only one.
	Limits courier.SharedLimits
	// Presence tells, on a store that several nodes share, when a node is
	// gone, so that its work is taken over at once; nil: its leases and
	// slots are taken over when they lapse. This node joins it while it
	// runs, and stops delivering whenever it is not present.
	Presence courier.Presence
	// Observer is told of attempts, applied changes and health changes
	// (default NopObserver).
	Observer Observer
	// Resolver resolves the endpoints of lookup routes' messages; without
	// it their attempts fail with class lookup.
	Resolver courier.Resolver
	// Alerts says who hears of operational events (Event) and when a
	// route lags; without it events are recorded and listed, not sent, and
	// a route lags after courier.DefaultOldestDue.
	Alerts *courier.Alerts
	// PublicURL is courier's address as receivers reach it (public_url),
	// on which the URLs of claim-check notices are built; without it the
	// attempts of messages an endpoint's claim check takes fail and say so.
	PublicURL string
}

// Engine delivers due messages: it claims them as capacity frees, hands each
// to its endpoint's transport, and applies the outcomes in batches.
type Engine struct {
	store    courier.Store
	topology atomic.Pointer[courier.Topology]
	present  atomic.Pointer[presentState] // the name it claims under, and whether it may deliver
	bulk     atomic.Pointer[Bulk]         // starts re-drives (Redrive); nil: none
	orphans  orphans
	senders  map[courier.Transport]courier.Sender
	clock    courier.Clock
	logger   *slog.Logger
	opts     Options

	wake     chan struct{}   // a nudge for the claimer: ingest, freed capacity
	outcomes chan outcome    // finished attempts, for the completer
	inflight atomic.Int64    // attempts running on this node
	pending  atomic.Int64    // finished attempts whose outcome is not yet written
	slots    *endpointSlots  // attempts running per endpoint
	pace     pacer           // when paced endpoints may start again
	activity activity        // outcomes per endpoint over the last hour
	auth     authWatch       // endpoints failing to obtain credentials on this node
	rr       sync.Map        // route name → *atomic.Uint64, round-robin positions
	lanes    *lanes          // which routes have due work
	sweepNow chan struct{}   // Wake asks for a sweep of the store
	health   healthCache     // the endpoints' health as last read or written
	lookups  lookupRoutes    // attempts under way on lookup routes, resolved endpoints in use
	workers  *workers        // the goroutines attempts run on
	steady   steadyEndpoints // endpoints whose health deliveries leave as it is
	lag      lagWatch        // the routes' oldest due messages, for route.lagging
	// events records the operational events, batch by batch.
	events eventBatcher

	startstop.Base                // runs between Start and Stop; a run's Ctx ends the loops: no new claims
	loops          sync.WaitGroup // claimer, sweeper, rescuer, timers
	attempts       sync.WaitGroup // running attempts
	done           chan struct{}  // closed when the completer has flushed
	// life is the context of what outlives the loops at a stop: attempts
	// under way, their pacing, and the writing of outcomes and health: the
	// run's Life, which ends when a stop runs out of time, cutting all of
	// that off as a crash would: the leases lapse and the messages are
	// taken up again.
	life context.Context
}

// outcome is one finished attempt on its way to the store.
type outcome struct {
	t        *courier.Topology // the topology the attempt was claimed and sent under, and is decided under
	msg      *courier.Message  // as claimed
	endpoint *courier.Endpoint
	result   courier.Result
	probe    bool // the one attempt let through to a suspended endpoint
	started  time.Time
	duration time.Duration
	// deferUntil, when set, puts the message back until then: no attempt
	// was made (its resolved endpoint could not take it yet).
	deferUntil time.Time
	// ctx carries the attempt's span, for the lines logged of its
	// outcome; nil with tracing off.
	ctx context.Context
}

// New returns an engine for the options.
func New(o Options) *Engine {
	o.Clock = courier.ClockOrSystem(o.Clock)
	o.Logger = courier.LoggerOrDiscard(o.Logger)
	if o.Workers <= 0 {
		o.Workers = 256
	}
	if o.Owner == "" {
		host, _ := os.Hostname()
		o.Owner = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	if o.LeaseSlack <= 0 {
		o.LeaseSlack = 10 * time.Second
	}
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	if o.RescueInterval <= 0 {
		o.RescueInterval = 5 * time.Second
	}
	if o.TimerInterval <= 0 {
		o.TimerInterval = time.Second
	}
	if o.RandFunc == nil {
		o.RandFunc = rand.Float64
	}
	if o.Observer == nil {
		o.Observer = NopObserver{}
	}
	if o.Alerts == nil {
		o.Alerts = &courier.Alerts{}
	}
	e := &Engine{
		store:    o.Store,
		senders:  o.Senders,
		clock:    o.Clock,
		logger:   o.Logger,
		opts:     o,
		wake:     make(chan struct{}, 1),
		sweepNow: make(chan struct{}, 1),
		outcomes: make(chan outcome, o.Workers),
		slots:    newEndpointSlots(o.Limits),
		lanes:    newLanes(),
		workers:  newWorkers(2 * o.Workers),
	}
	e.life = context.Background()
	e.topology.Store(o.Topology)
	e.present.Store(&presentState{owner: o.Owner, ctx: context.Background()})
	e.slots.gone = func(endpoint string) bool { return tenantGone(e.topology.Load(), endpoint) }
	return e
}

// SetTopology replaces the routes, endpoints and policies, as on reload.
// Attempts under way finish with the endpoint they started with; queued
// messages of routes that are gone are suspended (no_route). What the
// engine keeps of a tenant that is gone goes (forgetTenants).
func (e *Engine) SetTopology(t *courier.Topology) {
	before := e.topology.Swap(t)
	e.lanes.forget(func(route string) bool { return t.Route(route) != nil })
	if gone := goneTenants(before, t); len(gone) > 0 {
		e.forgetTenants(gone)
	}
	if len(goneTenants(t, before)) > 0 {
		// A tenant made (again): the health of its endpoints, which this
		// node kept none of while the tenant did not exist, is read whole.
		e.health.mu.Lock()
		e.health.resync = true
		e.health.mu.Unlock()
	}
	e.lanes.releaseAll() // their endpoints, or what holds them, may have changed
	if err := e.suspendRemovedRoutes(e.life, before, t); err != nil {
		e.logger.Warn("could not suspend the messages of removed routes; will try again", "err", err)
	}
	e.Wake()
}

// Wake tells the claimer that there may be new due work it cannot name,
// such as messages resubmitted in bulk or an endpoint switched on: it looks
// at the store again (at most every 50 ms, however often it is woken). It
// never blocks. When the routes are known, Due is cheaper.
func (e *Engine) Wake() {
	select {
	case e.sweepNow <- struct{}{}:
	default:
	}
}

// Due tells the claimer that the routes have messages due now, such as
// messages just ingested; with no routes, that some may have and it cannot
// name them: then it is Wake. It never blocks.
func (e *Engine) Due(routes []string) {
	if len(routes) == 0 {
		e.Wake()
		return
	}
	now := e.clock.Now()
	for _, r := range routes {
		e.lanes.due(r, now, now)
	}
	e.nudge()
}

// Scheduled notes that route has a message coming due at the time, so that
// its lane is claimed then, not when a sweep next finds it.
func (e *Engine) Scheduled(route string, at time.Time) {
	e.lanes.due(route, at, e.clock.Now())
	e.nudge() // the claimer sleeps until the earliest lane's time: this may be earlier
}

// nudge wakes the claimer to look at its lanes.
func (e *Engine) nudge() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// noteChanges makes the lanes of applied changes ready when they bring
// work due: a retry at its time, a message put back or taken up, a move to
// another route; and for a message with an ordering key, the next one of
// its key, which the change may have let go.
func (e *Engine) noteChanges(changes []courier.Change, applied []bool) {
	now := e.clock.Now()
	for i, c := range changes {
		if applied == nil || !applied[i] {
			continue
		}
		m := c.Message
		switch {
		case m.OrderingKey != "":
			e.lanes.due(m.Route, now, now)
		case m.State == courier.StateQueued && !m.NextAttemptAt.IsZero():
			e.lanes.due(m.Route, m.NextAttemptAt, now)
		}
		for _, n := range c.Notices {
			e.lanes.due(n.Route, n.NextAttemptAt, now)
		}
	}
	e.nudge()
}

// Start runs the engine in the background until Stop. Started again after
// a stop, it runs again.
func (e *Engine) Start(ctx context.Context) error {
	run, ok := e.StartInit(ctx)
	if !ok {
		return ctx.Err()
	}
	if e.opts.RescueAllOnStart {
		if err := e.rescue(run.Ctx, time.Unix(1<<40, 0)); err != nil {
			run.Stopped()
			return fmt.Errorf("rescue the leases of the previous run: %w", err)
		}
	}
	// What a run's goroutines share is made afresh for each run: the last
	// one's stop closed it.
	e.life = run.Life
	e.outcomes = make(chan outcome, e.opts.Workers)
	e.workers = newWorkers(2 * e.opts.Workers)
	done := make(chan struct{})
	e.done = done
	go e.complete()
	ctx = run.Ctx
	if e.opts.Presence != nil {
		// Nothing is claimed before the node has joined (attend).
		e.present.Store(&presentState{owner: e.opts.Owner, ctx: lostPresence})
		e.loops.Add(2)
		go e.attend(ctx)
		go e.every(ctx, takeOverInterval, e.takeOver)
	}
	e.loops.Add(6)
	go e.every(ctx, 5*time.Minute, e.suspendOrphans)
	go e.every(ctx, e.lagInterval(), e.checkLag)
	go e.claimLoop(ctx)
	go e.sweepLoop(ctx)
	go e.every(ctx, e.opts.RescueInterval, func(ctx context.Context) error { return e.rescue(ctx, e.clock.Now()) })
	go e.every(ctx, e.opts.TimerInterval, e.fireTimers)
	go func() {
		defer run.Stopped()
		<-ctx.Done()
		e.loops.Wait()
		e.attempts.Wait()
		e.workers.stop()
		close(e.outcomes)
		<-done
		e.events.wait() // those of the last outcomes too
		// Leaving last, once the outcomes are written: what is still leased
		// (attempts cut off) is the others' to take up at once.
		defer e.leave()
		if run.Life.Err() != nil {
			return // cut off: the slots lapse by themselves, or go with the presence
		}
		if err := e.slots.releaseAll(run.Life, e.owner()); err != nil {
			e.logger.Warn("could not give back the endpoint slots this node held; they lapse by themselves", "err", err)
		}
	}()
	return nil
}

// Stop stops claiming, lets the attempts under way finish and writes their
// outcomes, until ctx ends. Then whatever is still under way is cut off, as
// at a crash: attempts are abandoned and outcomes not yet written are
// dropped, and their messages are taken up again when the leases lapse.
func (e *Engine) Stop(ctx context.Context) error {
	stopped, cutOff, ok := e.StopInit()
	if !ok {
		return nil
	}
	err := startstop.WaitOrCutOff(ctx, stopped, cutOff)
	if err == nil {
		return nil
	}
	// Cut off, everything winds down at once; a transport that does not
	// heed its context is not waited for.
	select {
	case <-stopped:
	case <-time.After(cutOffGrace):
	}
	return fmt.Errorf("attempts or outcomes still under way at stop were cut off: %w", err)
}

// cutOffGrace is how long a stop that ran out of time waits for the work
// it cut off to wind down.
const cutOffGrace = 500 * time.Millisecond

// every runs fn now and then every interval until ctx ends; a failure is
// logged and tried again at the next tick.
func (e *Engine) every(ctx context.Context, interval time.Duration, fn func(context.Context) error) {
	defer e.loops.Done()
	startstop.Every(ctx, 0, interval, func(ctx context.Context) {
		if err := fn(ctx); err != nil && ctx.Err() == nil {
			e.logger.Warn("background work failed; will try again", "err", err)
		}
	})
}

// claimLoop claims due work whenever there is capacity, and otherwise waits
// for a wake-up, the next lane's time or the poll interval.
func (e *Engine) claimLoop(ctx context.Context) {
	defer e.loops.Done()
	poll := time.NewTimer(0)
	defer poll.Stop()
	var pause backoff
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.wake:
		case <-poll.C:
		}
		more, wakeAt, err := e.claimOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if !pause.settle(err, poll, e.logger, "claiming due messages failed; will try again") {
			continue
		}
		if more {
			e.nudge()
		}
		now := e.clock.Now()
		next := e.opts.PollInterval
		for _, at := range []time.Time{wakeAt, e.lanes.nextAt()} {
			if !at.IsZero() {
				next = min(next, at.Sub(now))
			}
		}
		resetTimer(poll, max(next, time.Millisecond))
	}
}

// backoff is the pause of a loop after failures in a row: 100 ms, doubling
// up to 10 s; zero after a success.
type backoff time.Duration

// after sets t to the next pause and returns it.
func (b *backoff) after(t *time.Timer) time.Duration {
	*b = backoff(min(max(2*time.Duration(*b), 100*time.Millisecond), 10*time.Second))
	resetTimer(t, time.Duration(*b))
	return time.Duration(*b)
}

// settle ends a round of a loop. After a failure it logs msg with the
// error, sets t to the next pause and reports false: the loop waits for t
// before it tries again. After a success it resets the pause and reports
// true: the loop goes on and sets t itself.
func (b *backoff) settle(err error, t *time.Timer, logger *slog.Logger, msg string) bool {
	if err == nil {
		*b = 0
		return true
	}
	logger.Warn(msg, "err", err, "in", b.after(t))
	return false
}

// minSweep is the least time between two sweeps that Wake asks for: a burst
// of wake-ups costs one sweep. sweepCost bounds the share of the time the
// sweeps may take: a sweep that took d waits sweepCost × d before the next
// periodic one (and at least the poll interval), so that with many routes
// with queued messages they stay a small part of the store's work.
const (
	minSweep  = 50 * time.Millisecond
	sweepCost = 20
)

// sweepLoop sweeps the store for due work at start, every poll interval
// (longer when a sweep is costly) and when woken by Wake, beside the claim
// loop, which it never holds up.
func (e *Engine) sweepLoop(ctx context.Context) {
	defer e.loops.Done()
	timer := time.NewTimer(0)
	defer timer.Stop()
	var pause backoff
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.sweepNow:
			if wait := minSweep - e.clock.Now().Sub(last); wait > 0 {
				resetTimer(timer, wait) // woken again right after a sweep: the next comes soon
				continue
			}
		case <-timer.C:
		}
		last = e.clock.Now()
		err := e.sweep(ctx)
		took := e.clock.Now().Sub(last)
		if ctx.Err() != nil {
			return
		}
		if !pause.settle(err, timer, e.logger, "looking for due messages failed; will try again") {
			continue
		}
		e.nudge()
		resetTimer(timer, max(e.opts.PollInterval, sweepCost*took))
	}
}

// sweep reads the endpoints' health and the routes with due work from the
// store, and makes the lanes of those routes ready (or waiting for their
// time). It finds what no notice named: work of other nodes, messages
// whose deliver_after comes, leases taken up.
func (e *Engine) sweep(ctx context.Context) error {
	if err := e.refreshHealth(ctx, true); err != nil {
		return err
	}
	due, err := e.store.DueRoutes(ctx)
	if err != nil {
		return err
	}
	now := e.clock.Now()
	e.lag.seen.Store(&dueSeen{at: now, routes: due})
	t := e.topology.Load()
	for _, d := range due {
		if t.Route(d.Route) != nil {
			e.lanes.due(d.Route, d.At, now)
		}
	}
	// Held lanes are looked at again once per sweep, whatever holds them:
	// a release that was missed delays them by a sweep at most.
	e.lanes.releaseAll()
	return nil
}

func resetTimer(t *time.Timer, d time.Duration) {
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	t.Reset(d)
}

// claimOnce claims what the free capacity allows from the ready lanes, in
// their turn, and starts an attempt for each message. Lanes whose endpoints
// cannot take anything now are put to wait until they can. more reports
// that lanes are still ready and capacity is left, or that a claim came back
// full; wakeAt, when a paced endpoint may start again.
func (e *Engine) claimOnce(ctx context.Context) (more bool, wakeAt time.Time, err error) {
	// Outcomes waiting to be written may run up to Workers without holding
	// back new attempts; past that they do, so that a slow store slows the
	// claiming instead of piling up outcomes in memory.
	free := int64(e.opts.Workers) - e.inflight.Load() - max(0, e.pending.Load()-int64(e.opts.Workers))
	present := e.present.Load()
	if free <= 0 || present.ctx.Err() != nil {
		return false, time.Time{}, nil
	}
	owner := present.owner
	rd, err := e.newRound(ctx)
	if err != nil {
		return false, time.Time{}, err
	}
	defer e.releaseProbes(rd)
	t, now := rd.t, rd.now
	var quotas []courier.RouteQuota
	var lease time.Duration
	resolved, resolvedFull := e.lookups.recent(now)
	for name, full := range resolvedFull {
		e.slots.claimed(name, full)
	}
	left := int(free)
	// Each ready lane's share of the free capacity: a route may take more
	// only when fewer are ready than there is capacity, so that one round
	// reaches many routes with a few messages each rather than asking a few
	// for more than they have.
	share := max(1, left/max(1, e.lanes.readyCount()))
	// The tenants that want capacity take turns (fair.go). A turn is worth
	// the tenant's weight times an equal part of the round's capacity, and
	// a tenant with few routes may take its turn's worth through them: one
	// route may claim a tenant's whole part. The part is at least
	// minQuantum.
	sharing, wanting := e.lanes.beginRound()
	part := max(share, left/max(1, wanting), minQuantum)
	quantum := func(tenant string) int { return max(t.Tenant(tenant).Weight, 1) * part }
	if sharing && e.opts.Limits != nil {
		// Each tenant's turn is a few routes, and would ask the store for
		// their endpoints' slots on its own: the round asks once for the
		// endpoints of the lanes its turns are about to reach.
		if err := e.slots.refresh(ctx, owner, rd.endpointsAhead(e.lanes.upcoming(left, part)), t.Endpoints, now); err != nil {
			return false, time.Time{}, err
		}
	}
	for left > 0 {
		tn := e.lanes.takeTurn(now, left, quantum)
		names := tn.routes
		if len(names) == 0 {
			break
		}
		laneShare := share
		if tn.limited {
			laneShare = max(share, (tn.deficit+len(names)-1)/len(names))
		}
		routes := make([]*courier.Route, 0, len(names))
		for _, name := range names {
			if r := t.Route(name); r != nil {
				routes = append(routes, r)
				continue
			}
			e.lanes.hold(name, hold{}) // gone; its messages are suspended no_route
		}
		if err := e.slots.refresh(ctx, owner, append(e.sendingEndpoints(ctx, rd, routes), resolved...), t.Endpoints, now); err != nil {
			for _, r := range routes {
				e.lanes.claimed(r.Name, true) // ready again for the next try
			}
			for _, q := range quotas {
				e.lanes.claimed(q.Route, true)
			}
			return false, time.Time{}, err
		}
		resolved = nil
		spent := false
		for i, r := range routes {
			if left == 0 || spent {
				// The capacity went to the lanes before, or the tenant's
				// turn is spent: the others keep their turn for later.
				var rest []string
				for _, r := range routes[i:] {
					rest = append(rest, r.Name)
				}
				e.lanes.untake(rest)
				break
			}
			if r.Lookup != nil {
				q := e.lookupCapacity(r)
				if q <= 0 {
					e.lanes.hold(r.Name, hold{until: now.Add(lookupRecheck)})
					continue
				}
				q = min(q, left, laneShare)
				left -= q
				spent = e.lanes.charge(tn, q)
				quotas = append(quotas, courier.RouteQuota{Route: r.Name, Limit: q})
				lease = max(lease, lookupTimeout(r))
				continue
			}
			q, h := e.routeCapacity(ctx, rd, r)
			if q <= 0 {
				e.lanes.hold(r.Name, h)
				if sharing {
					e.lanes.heldBack(r.Name, e.fullOf(rd, h), now)
				}
				e.recheck(rd, h)
				continue
			}
			q = min(q, left, laneShare)
			left -= q
			if sharing {
				// Tenants share the endpoints: the turns decide who gets
				// their free slots. One alone may claim ahead of them, as
				// routes sharing an endpoint always did: its attempts
				// wait for a slot here, and the claims are fewer.
				e.lanes.used(r.Name, rd.grant(q), now)
			}
			spent = e.lanes.charge(tn, q)
			quotas = append(quotas, courier.RouteQuota{Route: r.Name, Limit: q})
			lease = max(lease, e.routeTimeout(t, r))
		}
	}
	e.lanes.endRound(left > 0, now)
	if len(quotas) == 0 {
		return false, rd.wakeAt, nil
	}
	span := startBatch(ctx, "claim")
	msgs, err := e.store.ClaimDue(ctx, courier.Claim{Now: now, LeaseUntil: now.Add(lease + e.opts.LeaseSlack),
		Owner: owner, Routes: quotas, Max: int(free)})
	endBatch(span, len(msgs), err)
	if err != nil {
		for _, q := range quotas {
			e.lanes.claimed(q.Route, true)
		}
		return false, time.Time{}, err
	}
	got := make(map[string]int, len(quotas))
	for _, m := range msgs {
		got[m.Route]++
		e.dispatch(ctx, rd, m)
	}
	// Slots granted and not used (a claim came back short) are free for
	// the lanes parked on them in this round.
	for name := range rd.granted {
		if ep := t.Endpoints[name]; ep != nil && e.slots.free(ep) > 0 {
			e.lanes.release(name)
		}
	}
	asked := 0
	for _, q := range quotas {
		asked += q.Limit
		full := got[q.Route] >= q.Limit
		more = more || full
		e.lanes.claimed(q.Route, full)
		if e.opts.Limits != nil {
			if r := t.Route(q.Route); r != nil {
				for _, name := range r.Endpoints {
					e.slots.claimed(name, full)
				}
			}
		}
	}
	// Capacity left, or asked for and not used: other lanes may be ready.
	return more || (left > 0 || len(msgs) < asked) && e.lanes.pending(), rd.wakeAt, nil
}

// minQuantum is the least a tenant's turn is worth, in messages, times
// its weight. With more tenants waiting than a round has capacity, an
// equal part would be one message each, and a round would claim one
// route of each of many tenants: its claims and outcomes then fall on
// as many places of the store's queue index (on SQLite, a page written
// per message, four times the commit's work). A turn of a few messages
// keeps a tenant's claims together; the shares over rounds are the same,
// and a tenant that starts to want capacity still waits one turn at most.
const minQuantum = 16

// lookupRecheck is how long a lookup route whose attempts fill its
// template's max_concurrency waits before it is looked at again, unless an
// attempt of it ends first.
const lookupRecheck = 100 * time.Millisecond
