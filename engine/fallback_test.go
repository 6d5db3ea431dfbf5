package engine_test

import (
	filetransport "github.com/courier-gw/courier/transport/file"
	httptransport "github.com/courier-gw/courier/transport/http"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/sink"
)

// TestFallbackToFileRoute is the VANS case end to end: route acme delivers
// over HTTP to a receiver that refuses; when the policy runs out (or its
// fallback time comes) the message goes to route vans, which writes it as a
// file. The file is there, the message is delivered via vans, and its
// history shows the attempts on both routes.
func TestFallbackToFileRoute(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy func(p *courier.Policy)
		acme   func(h *harness) *courier.Endpoint
	}{
		{
			// The receiver answers 503 to every attempt until the
			// schedule is spent.
			name:   "on exhaustion",
			policy: func(p *courier.Policy) { p.Fallback = &courier.Fallback{Route: "vans"} },
			acme: func(h *harness) *courier.Endpoint {
				h.sink.Script("/acme", sink.Respond(503), sink.Repeat)
				return h.httpEndpoint("acme", "/acme")
			},
		},
		{
			// Nothing listens: the default health rules suspend the
			// endpoint after the first refusal and hold the message, so
			// only the fallback's time moves it on.
			name:   "after a time",
			policy: func(p *courier.Policy) { p.Fallback = &courier.Fallback{After: 700 * time.Millisecond, Route: "vans"} },
			acme: func(h *harness) *courier.Endpoint {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				addr := ln.Addr().String()
				ln.Close()
				e := courier.NewEndpoint("acme", courier.TransportHTTP)
				e.Timeout = 2 * time.Second
				e.Settings = &httptransport.Settings{URL: "http://" + addr + "/inbox", Method: "POST"}
				return e
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			h := newHarness(t, func(h *harness) {
				h.top.Endpoints["acme"] = tc.acme(h)
				vans := courier.NewEndpoint("vans", courier.TransportFile)
				vans.Settings = &filetransport.Settings{Dir: dir, Name: "{type}-{id}.json"}
				h.top.Endpoints["vans"] = vans
				h.route("acme", "acme")
				h.route("vans", "vans")
				p := schedulePolicy("invoice", 50*time.Millisecond, 50*time.Millisecond)
				tc.policy(p)
				h.policy(p)
			})
			h.send("inv-1", "invoice", "acme")
			m := h.waitState("inv-1", courier.StateDelivered)
			if m.Route != "vans" || m.FallbackFrom != "acme" || m.Endpoint != "vans" {
				t.Errorf("delivered %+v, want via route vans, fallen back from acme", m)
			}
			got, err := os.ReadFile(filepath.Join(dir, "invoice-inv-1.json"))
			if err != nil || string(got) != `{"id":"inv-1"}` {
				t.Fatalf("file: %q, %v", got, err)
			}
			hist := h.attempts("inv-1")
			var onAcme, onVans int
			for _, a := range hist {
				switch {
				case a.Route == "acme" && a.Endpoint == "acme" && a.Outcome == courier.OutcomeFailed:
					onAcme++
				case a.Route == "vans" && a.Endpoint == "vans" && a.Outcome == courier.OutcomeDelivered:
					onVans++
					if a.Response != "wrote invoice-inv-1.json (14 bytes)" {
						t.Errorf("file attempt response %q", a.Response)
					}
				default:
					t.Errorf("unexpected attempt %+v", a)
				}
			}
			if onAcme == 0 || onVans != 1 || hist[len(hist)-1].Route != "vans" {
				t.Errorf("history: %d failed attempts on acme, %d delivered on vans, want some and 1 last: %+v", onAcme, onVans, hist)
			}
			if tc.name == "on exhaustion" && onAcme != 3 {
				t.Errorf("%d attempts on acme, want 3 (a schedule of 2 retries)", onAcme)
			}
		})
	}
}
