package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

// Two nodes that take in the same id at once, one as a message to a route
// and the other as a publish, end with one of them stored and the other
// told it conflicts: the database, not a read before the insert, decides
// which, so neither ever sees the other's id missing and stores it too.
func TestConcurrentPublishAndSendConflict(t *testing.T) {
	ns := nodes(t, 2)
	a, b := ns[0], ns[1]
	top := &courier.Topology{
		Routes: map[string]*courier.Route{"r": {Name: "r"}, "erp": {Name: "erp"}, "crm": {Name: "crm"}},
		Subscriptions: map[string]*courier.Subscription{
			"crm-orders": {Name: "crm-orders", Types: []string{"order.*"}, Route: "crm"},
			"erp-orders": {Name: "erp-orders", Types: []string{"order.*"}, Route: "erp"},
		},
	}
	top.Prepare()
	ctx := context.Background()
	const rounds = 40
	sentWins := 0
	for i := range rounds {
		id := fmt.Sprintf("o-%d", i)
		now := time.Now()
		sent := &courier.Message{ID: id, Type: "order.created", Route: "r", Payload: []byte("x"), ContentType: "text/plain"}
		if _, err := top.Admit(sent, courier.Intake{}, now); err != nil {
			t.Fatal(err)
		}
		deliveries, err := top.Admit(&courier.Message{ID: id, Type: "order.created", Payload: []byte("y"), ContentType: "text/plain"},
			courier.Intake{}, now)
		if err != nil || len(deliveries) != 2 {
			t.Fatalf("admit the publish: %d deliveries, %v", len(deliveries), err)
		}
		// Each node's ingest waits for the other to be ready, so that
		// the two statements meet in the database.
		var sentRes, pubRes []courier.IngestResult
		var sentErr, pubErr error
		var ready, wg sync.WaitGroup
		start := make(chan struct{})
		ready.Add(2)
		wg.Go(func() {
			ready.Done()
			<-start
			sentRes, sentErr = a.Ingest(ctx, []*courier.Message{sent})
		})
		wg.Go(func() {
			ready.Done()
			<-start
			pubRes, pubErr = b.Ingest(ctx, deliveries)
		})
		ready.Wait()
		close(start)
		wg.Wait()
		if sentErr != nil || pubErr != nil {
			t.Fatalf("%s: ingest: %v, %v", id, sentErr, pubErr)
		}
		published := pubRes[0].Status
		for _, r := range pubRes[1:] {
			if r.Status != published {
				t.Fatalf("%s: the deliveries of one publish answered %v and %v", id, published, r.Status)
			}
		}
		sentWon := sentRes[0].Status == courier.IngestCreated && published == courier.IngestConflict
		if !sentWon && (sentRes[0].Status != courier.IngestConflict || published != courier.IngestCreated) {
			t.Fatalf("%s: the message to a route was %v and the publish %v; want one created and the other a conflict",
				id, sentRes[0].Status, published)
		}
		stored, err := a.Deliveries(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if sentWon {
			sentWins++
		}
		if sentWon && (len(stored) != 1 || stored[0].Subscription != "") {
			t.Fatalf("%s: the message to a route was stored, but %d rows are", id, len(stored))
		}
		if !sentWon && (len(stored) != 2 || stored[0].Subscription != "crm-orders" || stored[1].Subscription != "erp-orders") {
			t.Fatalf("%s: the publish was stored, but %d rows are", id, len(stored))
		}
	}
	t.Logf("the message to a route won %d of %d rounds, the publish the others", sentWins, rounds)
}
