package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/quotedprintable"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/courier-gw/courier/internal/testkit/mailsink"
)

// TestServeFallsBackToFileAndMailsNotices runs the binary with a route over
// HTTP to a receiver that is not there, falling back to a file route, and
// an escalation to an smtp endpoint: the message ends as a file in the
// pick-up directory, and the notices arrive as mails that link to the
// message in the dashboard.
func TestServeFallsBackToFileAndMailsNotices(t *testing.T) {
	skipIfShort(t)
	mx := mailsink.MustStart(t, mailsink.Options{})

	dir := t.TempDir()
	outbox := filepath.Join(dir, "vans")
	os.Mkdir(outbox, 0o755)
	p := startNode(t, dir, fmt.Sprintf(`public_url: https://courier.example.org
endpoints:
  acme: {transport: http, url: "http://%s/inbox"}
  vans: {transport: file, dir: %s, name: "{type}-{id}.xml"}
  ops-mail: {transport: smtp, addr: %s, from: courier@example.org, to: [ops@example.org], starttls: never}
routes:
  acme: {endpoints: [acme]}
  vans: {endpoints: [vans]}
policies:
  invoice:
    schedule: [100ms]
    escalate: [{after: 200ms, notify: ops-mail}]
    fallback: {after: 1s, route: vans}
`, freeAddr(t), outbox, mx.Addr()))

	p.create(t, "inv-1", `{"type":"invoice","route":"acme","payload_base64":"PEludm9pY2UvPg==","content_type":"application/xml"}`)

	var got []byte
	waitUntil(t, p, 20*time.Second, "a file in the pick-up directory", func() bool {
		var err error
		got, err = os.ReadFile(filepath.Join(outbox, "invoice-inv-1.xml"))
		return err == nil
	})
	if string(got) != "<Invoice/>" {
		t.Fatalf("file holds %q", got)
	}

	// One escalation and one fallback notice.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := mx.Wait(ctx, 2); err != nil {
		t.Fatalf("notices: %d mails, %v\n%s", len(mx.Mails()), err, p.log())
	}
	kinds := map[string]bool{}
	for _, m := range mx.Mails() {
		msg, err := mail.ReadMessage(bytes.NewReader(m.Data))
		if err != nil {
			t.Fatal(err)
		}
		kinds[msg.Header.Get("Courier-Notice")] = true
		body, _ := io.ReadAll(quotedprintable.NewReader(msg.Body))
		if !strings.Contains(string(body), "https://courier.example.org/ui/messages/inv-1") ||
			!strings.Contains(msg.Header.Get("Subject"), "inv-1") {
			t.Errorf("notice %q without the message or its link:\n%s", msg.Header.Get("Subject"), body)
		}
	}
	if !kinds["escalation"] || !kinds["fallback"] {
		t.Errorf("notices %v, want an escalation and a fallback", kinds)
	}
}
