package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/pgtest"
	"github.com/courier-gw/courier/storetest"
)

// onPlan puts a message of the tests on the route "plan".
func onPlan(m *courier.Message, _ int) { m.Route = "plan" }

// Outcomes find their messages through the index of ids, also in a table
// that autovacuum has not analysed yet: there the planner joined a few
// hundred changes to 30,000 messages by hashing the whole table, so that
// each batch of outcomes read every message.
func TestApplyFindsMessagesByIndex(t *testing.T) {
	s := pgtest.Open(t)
	ctx := context.Background()
	now := time.Now()
	storetest.IngestBench(t, s, 30000, "m", now, onPlan)
	claimed, err := s.ClaimDue(ctx, courier.Claim{Now: now.Add(time.Second), LeaseUntil: now.Add(time.Hour), Owner: "plan",
		Routes: []courier.RouteQuota{{Route: "plan", Limit: 400}}})
	if err != nil || len(claimed) != 400 {
		t.Fatalf("claimed %d, %v; want 400", len(claimed), err)
	}
	// Half are written whole, half as Deliveries (which know the message
	// as leased): each way has a statement of its own.
	whole := storetest.Delivered(claimed[:200], now, false)
	plain := storetest.Delivered(claimed[200:], now, true)
	for _, changes := range [][]courier.Change{whole, plain} {
		plan, err := s.ExplainApply(ctx, changes)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(plan, "Seq Scan on messages") || !strings.Contains(plan, "using messages_key on messages") {
			t.Errorf("the plan of the outcomes (Deliveries: %v) reads the messages otherwise than by their ids' index:\n%s",
				changes[0].Delivery(), plan)
		}
		applied, err := s.Apply(ctx, changes)
		if err != nil || len(applied) != 200 || !applied[0] || !applied[199] {
			t.Fatalf("applied %v, %v", applied, err)
		}
	}
}

// A claim is served by one plan made for any parameters (claimPlan) at a
// connection's first claim, which may find a table of a few messages,
// analysed by autovacuum or not yet. Left to the planner, that plan read
// the whole table to lease what it found, and would have served the
// connection so until autovacuum analysed the grown table again. Made by
// ClaimDue's transaction, it reads the due messages by the index of queued
// ones and leases them where it found them, whatever the table's size.
func TestClaimFindsMessagesByIndex(t *testing.T) {
	for _, analysed := range []bool{false, true} {
		t.Run(fmt.Sprintf("analysed=%v", analysed), func(t *testing.T) {
			s := pgtest.Open(t)
			ctx := context.Background()
			now := time.Now()
			const n = 20
			storetest.IngestBench(t, s, n, "m", now, onPlan)
			if analysed {
				if err := s.Analyze(ctx); err != nil {
					t.Fatal(err)
				}
			}
			plan, err := s.ExplainClaim(ctx, "plan", 400)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(plan, "Seq Scan on messages") || !strings.Contains(plan, "using messages_queued on messages") ||
				!strings.Contains(plan, "Tid Scan on messages m") {
				t.Errorf("the claim's plan reads the messages otherwise than by the index of queued messages and their places:\n%s", plan)
			}
			claimed, err := s.ClaimDue(ctx, courier.Claim{Now: now.Add(time.Second), LeaseUntil: now.Add(time.Hour), Owner: "plan",
				Routes: []courier.RouteQuota{{Route: "plan", Limit: 400}}})
			if err != nil || len(claimed) != n {
				t.Fatalf("claimed %d, %v; want %d", len(claimed), err, n)
			}
		})
	}
}

// The live states are counted by route through their partial indexes, not
// by reading the finished messages kept for retention, also in a table
// that autovacuum has not analysed yet.
func TestCountLiveReadsLiveIndexes(t *testing.T) {
	s := pgtest.Open(t)
	ctx := context.Background()
	now := time.Now()
	for first := 0; first < 30000; first += 5000 {
		msgs := make([]*courier.Message, 5000)
		for i := range msgs {
			m := storetest.BenchMessage(fmt.Sprintf("m-%d", first+i), fmt.Sprintf("acme/r%d", i%50), now)
			if first+i >= 100 {
				m.State, m.FinishedAt, m.NextAttemptAt, m.TimerAt = courier.StateDelivered, now, time.Time{}, time.Time{}
			}
			msgs[i] = m
		}
		if _, err := s.Ingest(ctx, msgs); err != nil {
			t.Fatal(err)
		}
	}
	plan, err := s.ExplainCountLive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plan, "Seq Scan on messages") {
		t.Errorf("the count of the live states reads the whole table:\n%s", plan)
	}
	if routes, err := s.CountLive(ctx); err != nil || len(routes) != 50 || routes[0].Queued != 2 {
		t.Errorf("CountLive = %+v, %v; want 50 routes of 2 queued messages", routes, err)
	}
}
