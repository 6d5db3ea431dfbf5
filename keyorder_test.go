package courier_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

// memKeys is a store's key groups in memory: its members by ingest order.
type memKeys map[int64]*courier.Message

func (k memKeys) Group(route, key string, except int64) (courier.KeyGroup, error) {
	var g courier.KeyGroup
	for _, seq := range slices.Sorted(maps.Keys(k)) {
		m := k[seq]
		if seq == except || m.Route != route || m.OrderingKey != key || m.OrderSkipped {
			continue
		}
		switch {
		case m.State == courier.StateInflight || m.State == courier.StateQueued && !m.NextAttemptAt.IsZero():
			g.Active = true
		case m.State == courier.StateSuspended && g.OldestSuspended == 0:
			g.OldestSuspended = seq
		case m.State == courier.StateQueued && g.OldestWaiting == 0:
			g.OldestWaiting = seq
		}
	}
	return g, nil
}

func (k memKeys) DeliverAfter(seq int64) (time.Time, error) { return k[seq].DeliverAfter, nil }

func (k memKeys) Hold(seq int64) error {
	if k[seq].State == courier.StateQueued {
		k[seq].NextAttemptAt = time.Time{}
	}
	return nil
}

func (k memKeys) Promote(seq int64, p *courier.Message) error {
	if m := k[seq]; m.Waiting() {
		m.NextAttemptAt, m.RoundStartedAt, m.TimerAt, m.UpdatedAt = p.NextAttemptAt, p.RoundStartedAt, p.RoundStartedAt, p.RoundStartedAt
	}
	return nil
}

// due lists, as "seq:due" (due in minutes after t0, or "wait"), the queued
// members of k.
func (k memKeys) due(t0 time.Time) string {
	var out []string
	for _, seq := range slices.Sorted(maps.Keys(k)) {
		if m := k[seq]; m.State == courier.StateQueued {
			at := "wait"
			if !m.NextAttemptAt.IsZero() {
				at = fmt.Sprint(m.NextAttemptAt.Sub(t0).Minutes())
			}
			out = append(out, fmt.Sprintf("%d:%s", seq, at))
		}
	}
	return fmt.Sprint(out)
}

func TestAdmitKeyed(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	keyed := func(route, key string) *courier.Message {
		return &courier.Message{Route: route, OrderingKey: key, State: courier.StateQueued, NextAttemptAt: t0}
	}
	for _, tt := range []struct {
		name    string
		members memKeys
		msgs    []*courier.Message
		want    []bool // whether each waits
	}{
		{"an empty group admits the first, the rest of the call waits behind it", memKeys{},
			[]*courier.Message{keyed("r", "k"), keyed("r", "k"), keyed("r", "other"), keyed("s", "k")},
			[]bool{false, true, false, false}},
		{"an active member holds the key", memKeys{1: {Route: "r", OrderingKey: "k", State: courier.StateInflight}},
			[]*courier.Message{keyed("r", "k")}, []bool{true}},
		{"a suspended member holds the key", memKeys{1: {Route: "r", OrderingKey: "k", State: courier.StateSuspended}},
			[]*courier.Message{keyed("r", "k")}, []bool{true}},
		{"a message without a key never waits", memKeys{1: {Route: "r", OrderingKey: "k", State: courier.StateInflight}},
			[]*courier.Message{keyed("r", "")}, []bool{false}},
		{"one out of its key's order never waits", memKeys{1: {Route: "r", OrderingKey: "k", State: courier.StateInflight}},
			[]*courier.Message{{Route: "r", OrderingKey: "k", OrderSkipped: true, State: courier.StateQueued, NextAttemptAt: t0}}, []bool{false}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := courier.AdmitKeyed(tt.members, tt.msgs); err != nil {
				t.Fatal(err)
			}
			for i, m := range tt.msgs {
				if got := m.NextAttemptAt.IsZero(); got != tt.want[i] {
					t.Errorf("message %d waits: %v, want %v", i, got, tt.want[i])
				}
			}
		})
	}
}

func TestReorder(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(10 * time.Minute)
	member := func(route string, state courier.State, due time.Time) *courier.Message {
		return &courier.Message{Route: route, OrderingKey: "k", State: state, NextAttemptAt: due}
	}
	for _, tt := range []struct {
		name    string
		members memKeys
		seq     int64                  // the member changed
		change  func(*courier.Message) // the change, on the member as stored
		want    string                 // memKeys.due after
	}{
		{"the holder delivered lets the oldest waiting go", memKeys{
			1: member("r", courier.StateInflight, time.Time{}), 2: member("r", courier.StateQueued, time.Time{}),
			3: member("r", courier.StateQueued, time.Time{})},
			1, func(m *courier.Message) { m.State = courier.StateDelivered }, "[2:10 3:wait]"},
		{"the one let go keeps its deliver_after", memKeys{
			1: member("r", courier.StateInflight, time.Time{}),
			2: {Route: "r", OrderingKey: "k", State: courier.StateQueued, DeliverAfter: t0.Add(time.Hour)}},
			1, func(m *courier.Message) { m.State = courier.StateDelivered }, "[2:60]"},
		{"the holder suspended keeps the key", memKeys{
			1: member("r", courier.StateInflight, time.Time{}), 2: member("r", courier.StateQueued, time.Time{})},
			1, func(m *courier.Message) { m.State = courier.StateSuspended }, "[2:wait]"},
		{"a resubmitted holder goes before the younger waiting", memKeys{
			1: member("r", courier.StateSuspended, time.Time{}), 2: member("r", courier.StateQueued, time.Time{})},
			1, func(m *courier.Message) { m.State, m.NextAttemptAt = courier.StateQueued, now }, "[1:10 2:wait]"},
		{"one resubmitted behind an older suspended one waits", memKeys{
			1: member("r", courier.StateSuspended, time.Time{}), 2: member("r", courier.StateSuspended, time.Time{})},
			2, func(m *courier.Message) { m.State, m.NextAttemptAt = courier.StateQueued, now }, "[2:wait]"},
		{"moved to a held route it waits, and its old route goes on", memKeys{
			1: member("r", courier.StateSuspended, time.Time{}), 2: member("r", courier.StateQueued, time.Time{}),
			3: member("s", courier.StateInflight, time.Time{})},
			1, func(m *courier.Message) { m.State, m.Route, m.NextAttemptAt = courier.StateQueued, "s", now }, "[1:wait 2:10]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.members[tt.seq]
			p := courier.KeyPrior{Seq: tt.seq, Route: m.Route, State: m.State}
			tt.change(m)
			m.UpdatedAt = now
			if err := courier.Reorder(tt.members, m, p); err != nil {
				t.Fatal(err)
			}
			if got := tt.members.due(t0); got != tt.want {
				t.Errorf("queued after: %s, want %s", got, tt.want)
			}
		})
	}
}
