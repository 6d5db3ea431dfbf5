package storetest

import (
	"context"
	"reflect"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

// A fetch through a claim-check URL is recorded as an action on its message
// that changes nothing else; it is listed with the message's actions and in
// the audit log, and goes with the message when the retention purge takes
// it.
func testRecordAction(t *testing.T, s courier.Store) {
	ctx := context.Background()
	mustIngest(t, s, newMessage("big", base))
	before, err := s.Message(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	fetches := []courier.Action{
		{At: base.Add(time.Minute), Who: "endpoint:acme", Kind: courier.ActionClaimFetched, Subject: "big", Detail: "5242880 bytes to 192.0.2.1"},
		{At: base.Add(2 * time.Minute), Who: "endpoint:acme", Kind: courier.ActionClaimFetched, Subject: "big", Detail: "cut off after 100 bytes"},
	}
	for _, a := range fetches {
		if err := s.RecordAction(ctx, a); err != nil {
			t.Fatalf("RecordAction: %v", err)
		}
	}
	got, err := s.Actions(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Seq == 0 || got[1].Seq <= got[0].Seq {
		t.Fatalf("actions %+v, want the two fetches in order, numbered", got)
	}
	for i := range got {
		got[i].Seq = 0
	}
	if !reflect.DeepEqual(got, fetches) {
		t.Errorf("actions\n got %+v\nwant %+v", got, fetches)
	}
	after, err := s.Message(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(after, before) {
		t.Errorf("recording a fetch changed the message:\n got %+v\nwant %+v", after, before)
	}
	page, err := s.Audit(ctx, courier.AuditFilter{Kind: courier.ActionClaimFetched})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Actions) != 2 || page.Actions[0].Detail != fetches[1].Detail || page.Actions[1].Detail != fetches[0].Detail {
		t.Errorf("audit of fetches %+v, want both, newest first", page.Actions)
	}

	// The purge takes the fetches with their message.
	if _, err := s.Discard(ctx, "big", courier.Action{At: base.Add(3 * time.Minute), Who: "ops"}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Purge(ctx, courier.Purge{Before: base.Add(24 * time.Hour)}, 10); err != nil || n != 1 {
		t.Fatalf("purge: %d, %v; want 1", n, err)
	}
	if got, err := s.Actions(ctx, "big"); err != nil || len(got) != 0 {
		t.Errorf("actions after the purge: %+v, %v; want none", got, err)
	}
}
