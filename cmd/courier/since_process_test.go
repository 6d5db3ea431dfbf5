package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
)

// Every --since and --until of the command line takes an RFC 3339 time or
// a duration meaning that long ago; a replay started with them is in the
// audit log, as a resend is.
func TestSinceTakesBothFormsAndReplayIsAudited(t *testing.T) {
	skipIfShort(t)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "erp"), 0o700); err != nil {
		t.Fatal(err)
	}
	p := startNode(t, dir, fmt.Sprintf(`endpoints:
  erp: {transport: file, dir: %s}
routes:
  erp: {endpoints: [erp]}
subscriptions:
  erp-orders: {types: [order.*], route: erp}
`, filepath.Join(dir, "erp")))
	server := []string{"--server", p.url}
	for i := range 2 {
		binaryPrints(t, `{"n": 1}`, append(server, "send", "--type", "order.created", "--id", fmt.Sprintf("o-%d", i)), "created")
	}
	anHourAgo := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	inAnHour := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)

	// The subscription has its deliveries, delivered: a replay with --again
	// gives each again.
	c := api.NewClient(p.url, "")
	for i := range 2 {
		waitForState(t, p, c, fmt.Sprintf("o-%d", i), courier.StateDelivered, time.Now().Add(30*time.Second))
	}
	binaryPrints(t, "", append(server, "subscriptions", "replay", "erp-orders", "--since", "1h", "--again"),
		"replayed 2 deliveries to erp-orders")
	for i := range 2 {
		waitForState(t, p, c, fmt.Sprintf("o-%d", i), courier.StateDelivered, time.Now().Add(30*time.Second))
	}
	binaryPrints(t, "", append(server, "subscriptions", "replay", "erp-orders", "--since", anHourAgo, "--until", inAnHour, "--again"),
		"replayed 2 deliveries to erp-orders")
	binaryPrints(t, "", append(server, "subscriptions", "replay", "erp-orders", "--since", "2h", "--until", "1h"),
		"replayed 0 deliveries to erp-orders")
	binaryFails(t, nil, "", append(server, "subscriptions", "replay", "erp-orders", "--since", "yesterday"),
		`"yesterday" is neither an RFC 3339 time`)

	out := binaryPrints(t, "", append(server, "audit", "--action", "replay", "--since", "1h", "--until", inAnHour), "erp-orders")
	if n := strings.Count(out, "replay "); n != 3 {
		t.Errorf("audit lists %d replays, want 3:\n%s", n, out)
	}
	binaryPrints(t, "", append(server, "audit", "--since", anHourAgo), "replay")
	for _, since := range []string{"1h", anHourAgo} {
		binaryPrints(t, "", append(server, "suspended", "list", "--since", since), "ID")
	}
}
