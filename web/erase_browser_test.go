package web_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
)

// TestEraseInBrowser erases a suspended message's payload from its page in
// a real browser, as an operator handling a data-protection request does:
// the button asks first (and declining changes nothing), then the page
// says the payload was erased, when, by whom and why, instead of showing
// it, and the message is discarded.
func TestEraseInBrowser(t *testing.T) {
	d, _ := allPagesDashboard(t)
	d.suspend(t, &courier.Message{ID: "inv-5", Type: "invoice", Route: "acme", Payload: []byte(`{"name":"Jane Doe"}`), ContentType: "application/json"},
		"HTTP 400: the receiver refused it", "")
	b := newPageBrowser(t, d.URL)
	b.open("/ui/login?next=/ui/messages/inv-5", "#key")
	b.follow("log in", "#erase", chromedp.SendKeys(chromedp.ID("key"), secrets["ops"]), chromedp.Submit(chromedp.ID("key")))
	b.wantText("message before the erasure", "pre.payload", "Jane Doe")

	// Declined: nothing happens.
	asked, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`(() => {
		let asked = "";
		window.confirm = m => { asked = m; return false; };
		document.getElementById("erase").click();
		return asked;
	})()`))
	if err != nil || !strings.Contains(asked, "Erase the payload of this message for good?") {
		t.Fatalf("the erase button asks %q (%v); want it to ask first", asked, err)
	}
	root := api.NewClient(d.URL, secrets["root"])
	if m, err := root.Message(context.Background(), "inv-5"); err != nil || m.Erased != nil {
		t.Fatalf("after declining: erased %v, %v; want nothing erased", m.Erased, err)
	}

	// Confirmed, with a reason.
	b.do("give the reason", chromedp.SendKeys(chromedp.ID("erase-reason"), "GDPR request 118"))
	if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`window.confirm = () => true; true`)); err != nil {
		t.Fatal(err)
	}
	b.follow("erase", "p.note", chromedp.Click(chromedp.ID("erase")))
	b.wantText("erased message", "p.note", "The payload was erased for good")
	b.wantText("erased message", "#message-state", "discarded")
	b.wantText("erased message", "#erased", "by ops: GDPR request 118")
	b.wantText("erased message", "#payload-erased", "The payload (", "was erased", "by ops, for this reason: GDPR request 118", "Nothing of it is kept")
	if main := b.text("main"); strings.Contains(main, "Jane") {
		t.Errorf("the erased message's page shows its payload: %q", main)
	}
	if n, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`document.querySelectorAll("#erase, #resend, #discard, pre.payload").length`)); err != nil || n != 0 {
		t.Errorf("the erased message's page offers %d actions or a payload (%v), want none", n, err)
	}
	b.wantText("erased message", "main", "discard by ops (payload erased)", "erase by ops (GDPR request 118)")

	// The audit log, filtered by the erasures, leads to the message.
	b.open("/ui/audit?action=erase", "#audit")
	b.wantCells("audit of erasures", b.row("#audit", "inv-5"), "*", "ops", "erase", "inv-5", "GDPR request 118")
	if href, err := chromedp.Run(b.ctx, chromedp.AttributeValue(chromedp.CSS("#audit tbody a"), "href")); err != nil || href.Value != "/ui/messages/inv-5" {
		t.Errorf("the erasure's link in the audit log: %+v, %v", href, err)
	}
}
