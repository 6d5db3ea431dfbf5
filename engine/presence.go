package engine

import (
	"context"
	"fmt"
	"time"

	courier "github.com/courier-gw/courier"
)

// presentState is the name this node claims under and whether it may
// deliver: ctx ends when its presence in a shared store was lost, from
// when the other nodes may take over what it claimed under that name.
type presentState struct {
	owner      string
	ctx        context.Context
	attendance courier.Attendance // nil: the store keeps no presence
	lose       context.CancelFunc // ends ctx
}

// lostPresence is the state before a node first joined, and after it lost
// its presence until it joined again: nothing is claimed or sent.
var lostPresence = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// takeOverInterval is how often a node looks for nodes that are gone.
const takeOverInterval = time.Second

// owner is the name this node claims under now.
func (e *Engine) owner() string { return e.present.Load().owner }

// ours reports whether m, claimed by this node, may still be worked on: it
// was claimed under the name this node is present under, and that presence
// holds. Otherwise other nodes may have taken it over.
func (e *Engine) ours(m *courier.Message) (*presentState, bool) {
	p := e.present.Load()
	return p, p.ctx.Err() == nil && (m.LeaseOwner == "" || m.LeaseOwner == p.owner)
}

// attend keeps this node present in the store while the engine runs: it
// joins, and when the presence is lost it stops delivering (claims stop,
// attempts under way are cut short, their outcomes dropped and the slots
// it held forgotten, as the others take them over) and joins again under
// a new name, so that what it claimed before is the others' to take.
func (e *Engine) attend(ctx context.Context) {
	defer e.loops.Done()
	var pause backoff
	retry := time.NewTimer(0)
	defer retry.Stop()
	<-retry.C
	for n := 0; ; {
		owner := e.opts.Owner
		if n > 0 {
			owner = fmt.Sprintf("%s/%d", e.opts.Owner, n)
		}
		a, err := e.opts.Presence.Join(ctx, owner)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			e.logger.Warn("could not join the other nodes in the store; this node delivers nothing until it has", "owner", owner, "err", err)
			pause.after(retry)
			select {
			case <-ctx.Done():
				return
			case <-retry.C:
			}
			n++
			continue
		}
		pause = 0
		pctx, lose := context.WithCancel(context.Background())
		e.present.Store(&presentState{owner: owner, ctx: pctx, attendance: a, lose: lose})
		if n > 0 {
			e.logger.Info("this node is present again and delivers", "owner", owner)
		}
		e.nudge()
		select {
		case <-ctx.Done():
			return // Start's shutdown leaves once the outcomes are written
		case <-a.Lost():
		}
		lose()
		e.present.Store(&presentState{owner: owner, ctx: lostPresence})
		e.slots.forget()
		e.logger.Error("this node lost its presence in the store: it stops delivering, other nodes take over its messages and endpoint slots, and it joins again",
			"owner", owner)
		n++
	}
}

// leave ends this node's presence at a stop.
func (e *Engine) leave() {
	if p := e.present.Load(); p.attendance != nil {
		p.attendance.Leave()
		p.lose()
	}
}

// Ready reports why this node does not deliver now: its presence in a
// shared store is lost, or it has not joined yet. Nil when it delivers.
func (e *Engine) Ready() error {
	if e.opts.Presence == nil || e.present.Load().ctx.Err() == nil {
		return nil
	}
	return fmt.Errorf("this node is not present in the store (its session was lost, or it has not joined yet): it delivers nothing until it is")
}

// takeOver takes up the work of nodes that are gone: their leased messages
// are due again with an abandoned attempt each (as rescue does for lapsed
// leases), and their endpoint slots are free for the others.
func (e *Engine) takeOver(ctx context.Context) error {
	owners, err := e.opts.Presence.Departed(ctx)
	if err != nil || len(owners) == 0 {
		return err
	}
	for {
		msgs, err := e.opts.Presence.LeasesOf(ctx, owners, maxBatch)
		if err != nil {
			return err
		}
		if err := e.rescueLeases(ctx, msgs, "its node is gone"); err != nil {
			return err
		}
		if len(msgs) < maxBatch {
			break
		}
	}
	if err := e.opts.Presence.Forget(ctx, owners); err != nil {
		return err
	}
	e.logger.Info("took over the work of nodes that are gone", "owners", owners)
	e.nudge()
	return nil
}
