package web_test

import (
	"context"
	"encoding/json"
	httptransport "github.com/courier-gw/courier/transport/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
)

// TestEditEndpointInBrowser edits an endpoint on the dashboard in a real
// browser, as an admin does: its URL is changed from the endpoints page,
// and the API then gives the new URL; a URL the API refuses shows the
// API's message naming the field, on the form, with the text kept; and a
// save from a page that someone else's change made stale is refused.
func TestEditEndpointInBrowser(t *testing.T) {
	d, cat := newTopologyDashboard(t)
	b := newPageBrowser(t, d.URL)
	ctx := context.Background()
	// What a form leads to: a note that it was done, or why not, on the
	// page that answers it. Waiting for either, a test that goes wrong
	// says how at once.
	const outcome = ":is(main > p.note, main > p.error)"
	// save types the fields and saves them, and waits for the page that
	// answers.
	save := func(what, fields string) {
		t.Helper()
		b.follow(what, outcome, chromedp.SetValue(chromedp.ID("spec"), fields), chromedp.Click(chromedp.ID("save")))
	}
	admin := api.NewClient(d.URL, secrets["root"])
	apiURL := func() string {
		t.Helper()
		e, err := admin.Endpoint(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		var spec struct {
			URL string `json:"url"`
		}
		if err := json.Unmarshal(e.Spec, &spec); err != nil {
			t.Fatalf("the endpoint's spec %s: %v", e.Spec, err)
		}
		return spec.URL
	}

	b.do("log in", chromedp.Navigate(d.URL+"/ui/login?next=/ui/endpoints"), chromedp.WaitVisible(chromedp.ID("key")),
		chromedp.SendKeys(chromedp.ID("key"), secrets["root"]), chromedp.Submit(chromedp.ID("key")),
		chromedp.WaitVisible(chromedp.ID("new-endpoint")))

	// The endpoints page as a person reads it: its columns, and acme's row.
	b.wantHeadings("the endpoints page", "main table", "Endpoint | Transport | State | Suspended until | In flight | Limit | Queued | Last hour | ")
	if row := b.text("#ep-acme"); !strings.HasPrefix(row, "acme https://acme.example/in Edit http active") {
		t.Errorf("the endpoints page's row of acme reads %q", row)
	}

	// From the endpoints page to the endpoint's form: its fields as YAML,
	// the secret as "set".
	b.do("open the endpoint", chromedp.Click(chromedp.CSS(`#ep-acme a.edit`)), chromedp.WaitVisible(chromedp.ID("spec")))
	fields := b.value("#spec")
	if fields != "secret: set\ntransport: http\nurl: https://acme.example/in\n" {
		t.Fatalf("the form's fields: %q", fields)
	}
	if h := b.text("#secrets-hint"); !strings.Contains(h, "leave set and the stored secret is kept") {
		t.Errorf("the secrets hint: %q", h)
	}

	// A new URL, saved: the API has it, and the secret is kept.
	save("save a new url", strings.Replace(fields, "https://acme.example/in", "https://acme.example/v2/in", 1))
	if n := b.text(outcome); !strings.HasPrefix(n, "Saved.") {
		t.Errorf("after the save: %q", n)
	}
	if got := apiURL(); got != "https://acme.example/v2/in" {
		t.Errorf("GET /v1/endpoints/acme: url %q, want the new one", got)
	}
	if s := httptransport.Of(cat.Topology().Endpoints["acme"]).Secrets; len(s) != 1 || s[0] != acmeSecret {
		t.Errorf("the stored secret after the save: %q", s)
	}

	// A URL the API refuses: its message, naming the field, on the form;
	// the text typed kept; nothing changed.
	bad := "secret: set\ntransport: http\nurl: ftp://acme.example/in\n"
	save("save a bad url", bad)
	if e := b.text(outcome); !strings.Contains(e, "endpoints.acme.url: must be an absolute http or https URL") {
		t.Errorf("the error shown: %q", e)
	}
	if v := b.value("#spec"); v != bad {
		t.Errorf("the form after the refusal holds %q, want what was typed", v)
	}
	if got := apiURL(); got != "https://acme.example/v2/in" {
		t.Errorf("GET /v1/endpoints/acme after a refused save: url %q", got)
	}

	// Someone else changes it while the page is open: the save is refused
	// and says so, and their change stands.
	b.do("reload", chromedp.Click(chromedp.CSS(`form.object a[href="/ui/topology/endpoints/acme"]`)), chromedp.WaitVisible(chromedp.ID("spec")))
	if _, _, err := admin.PutObject(ctx, courier.KindEndpoint, "acme", json.RawMessage(`{"transport":"http","url":"https://acme.example/theirs","secret":"set"}`), -1); err != nil {
		t.Fatal(err)
	}
	save("save over their change", "secret: set\ntransport: http\nurl: https://acme.example/mine\n")
	if e := b.text(outcome); !strings.Contains(e, "was changed meanwhile") || !strings.Contains(e, "by root") || !strings.Contains(e, "reload the page") {
		t.Errorf("the error shown: %q", e)
	}
	if got := apiURL(); got != "https://acme.example/theirs" {
		t.Errorf("GET /v1/endpoints/acme after a stale save: url %q, want the other change", got)
	}
}
