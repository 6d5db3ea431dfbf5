package web_test

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	courier "github.com/courier-gw/courier"
)

var (
	olderRE = regexp.MustCompile(`<a href="([^"]+)" id="older">`)
)

// entries returns the rows of an audit page, one string each.
func entries(a answer) []string {
	rows := strings.Split(a.body, `<tr class="entry">`)[1:]
	for i, r := range rows {
		rows[i], _, _ = strings.Cut(r, "</tr>")
	}
	return rows
}

func TestAuditPage(t *testing.T) {
	d, cat := newTopologyDashboard(t)
	root, ops := d.browser(t), d.browser(t)
	root.login("root")
	ops.login("ops")
	token := root.csrf("/ui/topology")

	// A URL changed, an endpoint switched off, a route made and deleted.
	if a := root.post("/ui/topology/endpoints/acme", url.Values{"csrf": {token}, "version": {"1"},
		"spec": {"secret: set\ntimeout: 10s\ntransport: http\nurl: https://acme.example/v2/in\n"}}); a.status != http.StatusSeeOther {
		t.Fatalf("save: %d %s", a.status, a.body)
	}
	if a := ops.post("/ui/endpoints/acme/off", url.Values{"csrf": {ops.csrf("/ui/endpoints")}}); a.status != http.StatusSeeOther {
		t.Fatalf("switch off: %d %s", a.status, a.body)
	}
	if a := root.post("/ui/topology/new/routes", url.Values{"csrf": {token}, "name": {"globex"}, "spec": {"endpoints: [acme]\n"}}); a.status != http.StatusSeeOther {
		t.Fatalf("create: %d %s", a.status, a.body)
	}
	globex, _ := cat.Object(courier.KindRoute, "globex")
	if a := root.post("/ui/topology/routes/globex/delete", url.Values{"csrf": {token}, "version": {fmt.Sprint(globex.Version)}}); a.status != http.StatusSeeOther {
		t.Fatalf("delete: %d %s", a.status, a.body)
	}

	// An operator reads the log, newest first.
	a := ops.get("/ui/audit")
	want(t, "audit page", a, 200, `href="/ui/audit" aria-current="page"`)
	rows := entries(a)
	wantRows := []struct{ who, action, subject string }{
		{"root", "delete", "route globex"},
		{"root", "create", `route <a href="/ui/topology/routes/globex">globex</a>`},
		{"ops", "endpoint_off", `<a href="/ui/endpoints#ep-acme">acme</a>`},
		{"root", "replace", `endpoint <a href="/ui/topology/endpoints/acme">acme</a>`},
		{"setup", "create", `route <a href="/ui/topology/routes/acme">acme</a>`},
		{"setup", "create", `endpoint <a href="/ui/topology/endpoints/acme">acme</a>`},
	}
	if len(rows) != len(wantRows) {
		t.Fatalf("%d entries, want %d:\n%s", len(rows), len(wantRows), a.body)
	}
	for i, w := range wantRows {
		for _, s := range []string{"<b>" + w.who + "</b>", `<span class="pill">` + w.action + "</span>", w.subject} {
			if !strings.Contains(rows[i], s) {
				t.Errorf("entry %d does not show %q:\n%s", i, s, rows[i])
			}
		}
	}
	// A replace shows the fields it changed, and both specs.
	replace := rows[3]
	for _, s := range []string{
		"<code>url</code>: <del>https://acme.example/in</del> → <ins>https://acme.example/v2/in</ins>",
		"<code>timeout</code>: <ins>10s</ins> <small>(added)</small>",
		"Before and after",
	} {
		if !strings.Contains(replace, s) {
			t.Errorf("the replace does not show %q:\n%s", s, replace)
		}
	}
	if strings.Contains(replace, "<code>secret</code>") || strings.Contains(replace, "<code>transport</code>") {
		t.Errorf("the replace lists fields it did not change:\n%s", replace)
	}
	if !strings.Contains(html.UnescapeString(rows[0]), "endpoints: [acme]") {
		t.Errorf("the delete does not show what was deleted:\n%s", rows[0])
	}
	if strings.Contains(a.body, acmeSecret) {
		t.Fatal("the audit page shows a secret")
	}

	// Filters, one at a time: each keeps its own entries only, and the
	// form shows it.
	for _, c := range []struct {
		query string
		n     int
		shown string
	}{
		{"action=replace", 1, `<option selected>replace</option>`},
		{"who=ops", 1, `name="who" value="ops"`},
		{"object=route", 3, `<option selected>route</option>`},
		{"subject=globex", 2, `name="subject" value="globex"`},
		{"who=root&action=create", 1, `<option selected>create</option>`},
		{"who=nobody", 0, "Nothing recorded matches the filter"},
	} {
		a := ops.get("/ui/audit?" + c.query)
		want(t, "audit "+c.query, a, 200, c.shown)
		if got := len(entries(a)); got != c.n {
			t.Errorf("audit %s: %d entries, want %d", c.query, got, c.n)
		}
	}
	want(t, "a filter the API refuses", ops.get("/ui/audit?object=widget"), http.StatusUnprocessableEntity,
		"object &#34;widget&#34; is not endpoint, route, policy or subscription")
}

// The audit log is paged with the API's cursor, the filter kept from page
// to page.
func TestAuditPaging(t *testing.T) {
	d, cat := newTopologyDashboard(t)
	for i := range 60 {
		mustPut(t, cat, courier.KindPolicy, fmt.Sprintf("type-%02d", i), `{"max_attempts":3}`)
	}
	b := d.browser(t)
	b.login("ops")

	seen := map[string]bool{}
	page, pages := "/ui/audit?object=policy", 0
	for page != "" {
		a := b.get(page)
		want(t, "audit page", a, 200)
		pages++
		rows := entries(a)
		for _, r := range rows {
			name := regexp.MustCompile(`type-\d\d`).FindString(r)
			if name == "" || seen[name] {
				t.Fatalf("page %d: entry for %q (seen already: %v)", pages, name, seen[name])
			}
			seen[name] = true
		}
		if pages == 1 {
			if len(rows) != 50 || !strings.Contains(rows[0], "type-59") {
				t.Fatalf("first page: %d entries, newest first want type-59 at the top", len(rows))
			}
			if strings.Contains(a.body, ">Newest<") {
				t.Error("the first page links to the newest")
			}
		} else if !strings.Contains(a.body, `<a href="/ui/audit?object=policy">Newest</a>`) {
			t.Errorf("page %d does not link back to the newest", pages)
		}
		page = ""
		if m := olderRE.FindStringSubmatch(a.body); m != nil {
			page = html.UnescapeString(m[1])
			if !strings.Contains(page, "object=policy") || !strings.Contains(page, "cursor=") {
				t.Fatalf("the next page's link %q loses the filter or has no cursor", page)
			}
		}
	}
	if pages != 2 || len(seen) != 60 {
		t.Errorf("%d pages, %d entries; want 2 and 60", pages, len(seen))
	}
}
