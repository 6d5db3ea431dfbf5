package engine_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	httptransport "github.com/courier-gw/courier/transport/http"
)

// A token endpoint that is down fails the attempts with class auth: the
// receiver is not blamed (its health stays active with nothing counted,
// however many attempts fail so, more than would suspend it for a 5xx),
// the message is retried, and the failure is told once as
// endpoint.auth_failing. Once a token comes, the message is delivered with it.
func TestTokenEndpointDownLeavesTheHealthAlone(t *testing.T) {
	var up atomic.Bool
	var asked atomic.Int64
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := asked.Add(1); !up.Load() {
			http.Error(w, fmt.Sprintf("down %d", n), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"access_token":"tok","token_type":"Bearer","expires_in":3600}`)
	}))
	defer tokens.Close()
	h := newHarness(t, func(h *harness) {
		withAlerts(h, 6, time.Hour)
		ep := withRules(h.httpEndpoint("crm", "/crm"), time.Hour, time.Hour)
		httptransport.Of(ep).Auth.OAuth2 = &httptransport.OAuth2{TokenURL: tokens.URL, ClientID: "c", ClientSecret: "s"}
		h.top.Endpoints["crm"] = ep
		h.route("crm", "crm")
		h.policy(steadyPolicy("t", 100, 10*time.Millisecond))
	})
	h.send("m", "t", "crm")
	authFailures := func() int {
		n := 0
		for _, a := range h.attempts("m") {
			if a.Class == courier.ClassAuth {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(20 * time.Second)
	for authFailures() < 6 {
		if time.Now().After(deadline) {
			t.Fatalf("%d attempts of class auth, want 6", authFailures())
		}
		time.Sleep(10 * time.Millisecond)
	}
	health, err := h.store.Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, hl := range health {
		if hl.Endpoint == "crm" && (hl.State != courier.HealthActive && hl.State != "" || hl.Failures != 0 || hl.Suspensions != 0) {
			t.Fatalf("health %+v after token endpoint failures, want active with nothing counted", hl)
		}
	}
	if n := h.sink.Count("/crm"); n != 0 {
		t.Fatalf("the receiver got %d requests without a token", n)
	}
	up.Store(true)
	h.waitState("m", courier.StateDelivered)
	if got := h.sink.Arrivals("/crm")[0].Header.Get("Authorization"); got != "Bearer tok" {
		t.Fatalf("Authorization %q, want the token", got)
	}
	evs := h.events(courier.EventFilter{Subject: "crm"})
	if len(evs) != 1 || evs[0].Kind != courier.EventEndpointAuthFailing {
		t.Fatalf("events %+v, want one endpoint.auth_failing", evs)
	}
	if b := h.waitNotices(1)[0]; b.Event != courier.EventEndpointAuthFailing || b.Details.Reason == "" {
		t.Fatalf("notice %+v", b)
	}
}
