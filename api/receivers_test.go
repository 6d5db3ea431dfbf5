package api_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/internal/testkit/receivertest"
)

// The receive locations of a node over the API: listed with their counts,
// stopped and started by an operator.
func TestReceivers(t *testing.T) {
	inbox := t.TempDir()
	late := &lateReceivers{}
	ts := newTestServer(t, func(o *api.Options) { o.Receivers = late })
	late.Receivers = receivertest.StartPickup(t, ts.store, testTopology, &courier.Receiver{Name: "drop", Transport: courier.ReceiveDir,
		Type: "invoice", Route: "acme", Batch: 10, Dir: courier.DirSource{Path: inbox, Pattern: "*.xml", Settle: 20 * time.Millisecond}})
	os.WriteFile(filepath.Join(inbox, "inv-1.xml"), []byte("<invoice/>"), 0o644)

	list := func() courier.ReceiverStatus {
		t.Helper()
		status, body, _ := ts.call(t, "GET", "/v1/receivers", "")
		var l api.ReceiverList
		if err := json.Unmarshal(body, &l); status != http.StatusOK || err != nil || len(l.Receivers) != 1 {
			t.Fatalf("GET /v1/receivers: %d %s", status, body)
		}
		return l.Receivers[0]
	}
	deadline := time.Now().Add(10 * time.Second)
	for list().Received != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the file was not taken in: %+v", list())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r := list(); r.Name != "drop" || r.Transport != courier.ReceiveDir || r.State != courier.ReceiverRunning || r.Source != "directory "+inbox+" (*.xml)" {
		t.Fatalf("status %+v", r)
	}

	status, body, _ := ts.call(t, "POST", "/v1/receivers/drop/stop", "")
	var r courier.ReceiverStatus
	if err := json.Unmarshal(body, &r); status != http.StatusOK || err != nil || r.State != courier.ReceiverStopped || r.StopReason == "" {
		t.Fatalf("stop: %d %s", status, body)
	}
	status, body, _ = ts.call(t, "POST", "/v1/receivers/drop/start", "")
	if err := json.Unmarshal(body, &r); status != http.StatusOK || err != nil || r.State == courier.ReceiverStopped {
		t.Fatalf("start: %d %s", status, body)
	}
	for _, path := range []string{"/v1/receivers/nope/stop", "/v1/receivers/nope/start"} {
		if status, body, _ := ts.call(t, "POST", path, ""); status != http.StatusNotFound {
			t.Fatalf("POST %s: %d %s; want 404", path, status, body)
		}
	}
}

// Without receive locations the list is empty, not missing.
func TestNoReceivers(t *testing.T) {
	ts := newTestServer(t)
	status, body, _ := ts.call(t, "GET", "/v1/receivers", "")
	if status != http.StatusOK || string(body) != "{\"receivers\":[]}\n" {
		t.Fatalf("GET /v1/receivers: %d %q", status, body)
	}
}

// lateReceivers is given to the API before the service exists: the
// service needs the test server's store.
type lateReceivers struct{ courier.Receivers }
