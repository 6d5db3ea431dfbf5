package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/pgtest"
)

// Outcomes find their messages through the index of ids, also in a table
// that autovacuum has not analysed yet: there the planner joined a few
// hundred changes to 30,000 messages by hashing the whole table, so that
// each batch of outcomes read every message.
func TestApplyFindsMessagesByIndex(t *testing.T) {
	s := pgtest.Open(t)
	ctx := context.Background()
	now := time.Now()
	for first := 0; first < 30000; first += 5000 {
		msgs := make([]*courier.Message, 5000)
		for i := range msgs {
			msgs[i] = benchMessage(fmt.Sprintf("m-%d", first+i), "plan", now)
		}
		if _, err := s.Ingest(ctx, msgs); err != nil {
			t.Fatal(err)
		}
	}
	claimed, err := s.ClaimDue(ctx, courier.Claim{Now: now.Add(time.Second), LeaseUntil: now.Add(time.Hour), Owner: "plan",
		Routes: []courier.RouteQuota{{Route: "plan", Limit: 400}}})
	if err != nil || len(claimed) != 400 {
		t.Fatalf("claimed %d, %v; want 400", len(claimed), err)
	}
	changes := make([]courier.Change, len(claimed))
	for i, m := range claimed {
		next := *m
		next.State, next.FinishedAt, next.UpdatedAt, next.LeaseUntil, next.LeaseOwner = courier.StateDelivered, now, now, time.Time{}, ""
		changes[i] = courier.Change{Message: &next, From: courier.StateInflight, Token: m.TotalAttempts,
			Attempt: &courier.Attempt{MessageID: m.ID, N: m.TotalAttempts, Endpoint: "e", Route: m.Route, StartedAt: now,
				Outcome: courier.OutcomeDelivered, Status: 204}}
	}
	plan, err := s.ExplainApply(ctx, changes)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plan, "Seq Scan on messages") || !strings.Contains(plan, "using messages_id on messages") {
		t.Errorf("the outcomes' plan reads the messages otherwise than by their ids' index:\n%s", plan)
	}
	applied, err := s.Apply(ctx, changes)
	if err != nil || len(applied) != 400 || !applied[0] || !applied[399] {
		t.Fatalf("applied %v, %v", applied, err)
	}
}
