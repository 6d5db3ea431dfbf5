package storetest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

// recordEvent records ev alone with a decide that sets Notified as notify
// says and sends the notices given; it returns the event as recorded and
// whether it was new.
func recordEvent(t *testing.T, s courier.Store, ev courier.Event, notify bool, notices ...*courier.Message) (courier.Event, bool) {
	t.Helper()
	got, err := s.RecordEvents(context.Background(), []courier.Event{ev}, time.Hour, func(ev courier.Event, _ []courier.Event) (courier.Event, []*courier.Message) {
		ev.Notified = notify
		return ev, notices
	})
	if err != nil {
		t.Fatalf("RecordEvents %s: %v", ev.ID, err)
	}
	if len(got) == 0 {
		return courier.Event{}, false
	}
	return got[0], true
}

func eventAt(kind courier.EventKind, subject string, at time.Time) courier.Event {
	return courier.Event{ID: courier.EventID(kind, subject, at), Kind: kind, Subject: subject, At: at,
		Details: courier.EventDetails{State: courier.HealthSuspended, SuspendedUntil: at.Add(time.Minute), Suspensions: 2, Reason: "connect_refused"}}
}

// testEventsRecord: an event is recorded once, however often it comes,
// with its details and the notices it sends; decide sees the events of its
// subject since the time given, newest first, and no others.
func testEventsRecord(t *testing.T, s courier.Store) {
	ctx := context.Background()
	ev := eventAt(courier.EventEndpointSuspended, "acme", base)
	alerts := &courier.Alerts{Notify: []string{"ops"}}
	got, created := recordEvent(t, s, ev, true, alerts.Notices(ev, alerts.Notify)...)
	if !created || got.Seq == 0 || !got.Notified {
		t.Fatalf("first record: %+v created=%v; want created, with a seq, notified", got, created)
	}
	n := mustGet(t, s, ev.ID+".ops")
	if n.Type != courier.NoticeType || n.Route != courier.NoticeRoute("ops") || n.State != courier.StateQueued {
		t.Fatalf("the event's notice: %+v", n)
	}
	// The same transition again (another node): nothing new, decide not asked.
	got2, err := s.RecordEvents(ctx, []courier.Event{ev}, time.Hour, func(courier.Event, []courier.Event) (courier.Event, []*courier.Message) {
		t.Error("decide called for an event recorded before")
		return ev, nil
	})
	if err != nil || len(got2) != 0 {
		t.Fatalf("second record: %+v %v; want nothing recorded", got2, err)
	}

	recordEvent(t, s, eventAt(courier.EventEndpointRecovered, "acme", base.Add(time.Minute)), false)
	recordEvent(t, s, eventAt(courier.EventEndpointSuspended, "other", base.Add(2*time.Minute)), true)
	var seen []courier.Event
	late := eventAt(courier.EventEndpointSuspended, "acme", base.Add(3*time.Minute))
	if _, err := s.RecordEvents(ctx, []courier.Event{late}, late.At.Sub(base.Add(30*time.Second)), func(ev courier.Event, recent []courier.Event) (courier.Event, []*courier.Message) {
		seen = recent
		return ev, nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0].Kind != courier.EventEndpointRecovered || seen[0].Notified {
		t.Fatalf("decide saw %+v; want only acme's recovery since 30s after base, not notified", seen)
	}

	page, err := s.Events(ctx, courier.EventFilter{Subject: "acme", Kind: courier.EventEndpointSuspended})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 2 {
		t.Fatalf("acme's suspensions: %+v; want 2", page.Events)
	}
	first := page.Events[1]
	if first.ID != ev.ID || !first.At.Equal(base) || first.Details != ev.Details || !first.Notified {
		t.Fatalf("read back %+v; want %+v, notified", first, ev)
	}
}

// testEventsList: newest first, by kind, subject and time, page by page.
func testEventsList(t *testing.T, s courier.Store) {
	ctx := context.Background()
	kinds := []courier.EventKind{courier.EventEndpointSuspended, courier.EventEndpointRecovered, courier.EventRouteLagging}
	for i := range 9 {
		subject := []string{"a", "b", "c"}[i%3]
		recordEvent(t, s, eventAt(kinds[i%3], subject, base.Add(time.Duration(i)*time.Minute)), i%2 == 0)
	}
	all, err := s.Events(ctx, courier.EventFilter{})
	if err != nil || len(all.Events) != 9 || all.Next != "" {
		t.Fatalf("all events: %d, next %q, %v; want 9 on one page", len(all.Events), all.Next, err)
	}
	for i := 1; i < len(all.Events); i++ {
		if !all.Events[i].At.Before(all.Events[i-1].At) {
			t.Fatalf("not newest first: %v after %v", all.Events[i].At, all.Events[i-1].At)
		}
	}
	for _, tc := range []struct {
		f    courier.EventFilter
		want int
	}{
		{courier.EventFilter{Kind: courier.EventRouteLagging}, 3},
		{courier.EventFilter{Subject: "a"}, 3},
		{courier.EventFilter{Subject: "a", Kind: courier.EventRouteLagging}, 0},
		{courier.EventFilter{Since: base.Add(6 * time.Minute)}, 3},
		{courier.EventFilter{Subject: "b", Since: base.Add(4 * time.Minute)}, 2},
	} {
		page, err := s.Events(ctx, tc.f)
		if err != nil || len(page.Events) != tc.want {
			t.Errorf("Events(%+v) = %d, %v; want %d", tc.f, len(page.Events), err, tc.want)
		}
		for _, ev := range page.Events {
			if tc.f.Kind != "" && ev.Kind != tc.f.Kind || tc.f.Subject != "" && ev.Subject != tc.f.Subject || ev.At.Before(tc.f.Since) {
				t.Errorf("Events(%+v) listed %+v", tc.f, ev)
			}
		}
	}
	var paged []string
	f := courier.EventFilter{Limit: 4}
	for range 5 {
		page, err := s.Events(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range page.Events {
			paged = append(paged, ev.ID)
		}
		if page.Next == "" {
			break
		}
		f.Cursor = page.Next
	}
	if len(paged) != 9 {
		t.Fatalf("paged through %d events, want 9", len(paged))
	}
	for i, ev := range all.Events {
		if paged[i] != ev.ID {
			t.Fatalf("page order differs at %d: %s, want %s", i, paged[i], ev.ID)
		}
	}
	_, err = s.Events(ctx, courier.EventFilter{Cursor: "not a cursor"})
	wantCode(t, err, courier.CodeInvalidArgument)
}

// testEventsConcurrent: writers of one subject take turns, so that a
// decision on the events before (the rate limit) holds when nodes record
// at once; the same event recorded at once is recorded once.
func testEventsConcurrent(t *testing.T, s courier.Store) {
	ctx := context.Background()
	const limit = 3
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 10 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			ev := eventAt(courier.EventEndpointSuspended, "flap", base.Add(time.Duration(i)*time.Second))
			_, err := s.RecordEvents(ctx, []courier.Event{ev}, time.Hour, func(ev courier.Event, recent []courier.Event) (courier.Event, []*courier.Message) {
				sent := 0
				for _, r := range recent {
					if r.Notified {
						sent++
					}
				}
				ev.Notified = sent < limit
				return ev, nil
			})
			errs <- err
		}()
		go func() {
			defer wg.Done()
			ev := eventAt(courier.EventRouteLagging, "same", base)
			_, err := s.RecordEvents(ctx, []courier.Event{ev}, time.Hour, func(ev courier.Event, _ []courier.Event) (courier.Event, []*courier.Message) { return ev, nil })
			errs <- err
		}()
	}
	waitNoError(t, &wg, errs)
	page, err := s.Events(ctx, courier.EventFilter{Subject: "flap"})
	if err != nil || len(page.Events) != 10 {
		t.Fatalf("flap's events: %d %v; want 10", len(page.Events), err)
	}
	notified := 0
	for _, ev := range page.Events {
		if ev.Notified {
			notified++
		}
	}
	if notified != limit {
		t.Fatalf("%d of 10 concurrent events notified, want %d", notified, limit)
	}
	if page, err := s.Events(ctx, courier.EventFilter{Subject: "same"}); err != nil || len(page.Events) != 1 {
		t.Fatalf("one event recorded at once by 10 writers: %d %v; want 1", len(page.Events), err)
	}
}

// testEventsPurged: the retention purge takes events recorded before its
// cutoff along with the messages, and leaves the later ones.
func testEventsPurged(t *testing.T, s courier.Store) {
	ctx := context.Background()
	old := eventAt(courier.EventEndpointSuspended, "acme", base)
	recent := eventAt(courier.EventEndpointRecovered, "acme", base.Add(2*time.Hour))
	recordEvent(t, s, old, false)
	recordEvent(t, s, recent, false)
	if _, err := s.Purge(ctx, courier.Purge{Before: base.Add(time.Hour)}, 100); err != nil {
		t.Fatal(err)
	}
	page, err := s.Events(ctx, courier.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 1 || page.Events[0].ID != recent.ID {
		t.Fatalf("after the purge: %+v; want only the event after the cutoff", page.Events)
	}
}

// testEventsBatch: a batch is recorded in its order, leaves out the events
// recorded before (by another node, or earlier in the batch), and decides
// each event on the events before it, those of the batch included, as
// one-by-one recording would: the rate limit holds across the events of
// one batch, and the notices of the events it lets through are sent.
func testEventsBatch(t *testing.T, s courier.Store) {
	ctx := context.Background()
	alerts := &courier.Alerts{Notify: []string{"ops"}, MaxPerHour: 2}
	// Recorded before by another node, and notified: it counts.
	other := eventAt(courier.EventEndpointSuspended, "flap", base)
	recordEvent(t, s, other, true)
	var evs []courier.Event
	for i := 1; i <= 4; i++ {
		kind := courier.EventEndpointRecovered
		if i%2 == 0 {
			kind = courier.EventEndpointSuspended
		}
		evs = append(evs, eventAt(kind, "flap", base.Add(time.Duration(i)*time.Minute)))
	}
	lag := eventAt(courier.EventRouteLagging, "slow", base.Add(2*time.Minute))
	batch := []courier.Event{other, evs[0], lag, evs[1], evs[2], evs[1], evs[3]}
	seen := map[string][]string{}
	got, err := s.RecordEvents(ctx, batch, time.Hour, func(ev courier.Event, recent []courier.Event) (courier.Event, []*courier.Message) {
		if _, again := seen[ev.ID]; again {
			t.Errorf("decide called twice for %s", ev.ID)
		}
		for _, r := range recent {
			seen[ev.ID] = append(seen[ev.ID], r.ID)
		}
		ev.Notified = alerts.Allow(ev, recent)
		if !ev.Notified {
			return ev, nil
		}
		return ev, alerts.Notices(ev, alerts.Notify)
	})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i, ev := range got {
		ids = append(ids, ev.ID)
		if ev.Seq == 0 || i > 0 && ev.Seq <= got[i-1].Seq {
			t.Errorf("recorded %+v; want seqs rising in the order given", got)
		}
	}
	want := []string{evs[0].ID, lag.ID, evs[1].ID, evs[2].ID, evs[3].ID}
	if !slices.Equal(ids, want) {
		t.Fatalf("recorded %v; want %v (in order, without the events recorded before)", ids, want)
	}
	// Each saw its subject's events before it, newest first.
	if w := []string{evs[1].ID, evs[0].ID, other.ID}; !slices.Equal(seen[evs[2].ID], w) {
		t.Errorf("the third of the batch saw %v; want %v", seen[evs[2].ID], w)
	}
	if len(seen[lag.ID]) != 0 {
		t.Errorf("the lag saw %v; want nothing (another subject)", seen[lag.ID])
	}
	// other and evs[0] are the two an hour allows; the rest are held back.
	wantNotified := map[string]bool{evs[0].ID: true, lag.ID: true}
	page, err := s.Events(ctx, courier.EventFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 6 {
		t.Fatalf("%d events stored, want 6", len(page.Events))
	}
	for _, ev := range page.Events {
		if ev.ID == other.ID {
			continue
		}
		if ev.Notified != wantNotified[ev.ID] {
			t.Errorf("%s notified=%v, want %v", ev.ID, ev.Notified, wantNotified[ev.ID])
		}
		_, err := s.Message(ctx, ev.ID+".ops")
		if sent := err == nil; sent != wantNotified[ev.ID] {
			t.Errorf("notice of %s sent=%v (%v), want %v", ev.ID, sent, err, wantNotified[ev.ID])
		}
	}
	// The window bounds what the batch's own events show too.
	far := eventAt(courier.EventEndpointRecovered, "flap", base.Add(3*time.Hour))
	farther := eventAt(courier.EventEndpointSuspended, "flap", base.Add(3*time.Hour+time.Minute))
	seen = map[string][]string{}
	if _, err := s.RecordEvents(ctx, []courier.Event{far, farther}, 30*time.Second, func(ev courier.Event, recent []courier.Event) (courier.Event, []*courier.Message) {
		seen[ev.ID] = nil
		for _, r := range recent {
			seen[ev.ID] = append(seen[ev.ID], r.ID)
		}
		return ev, nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(seen[far.ID]) != 0 || len(seen[farther.ID]) != 0 {
		t.Errorf("saw %v; want nothing older than the window", seen)
	}
}
