package web

import (
	"strings"
	"testing"
)

// A spec shown as YAML and saved unchanged comes back as the same JSON:
// a string that looks like a number or a boolean stays a string, numbers
// keep their text, keys are sorted.
func TestSpecRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name, json, yaml string
	}{
		{"endpoint", `{"secret":"set","timeout":"30s","transport":"http","url":"https://acme.example/in"}`,
			"secret: set\ntimeout: 30s\ntransport: http\nurl: https://acme.example/in\n"},
		{"keys sorted", `{"url":"https://a.example","transport":"http"}`, "transport: http\nurl: https://a.example\n"},
		{"strings that look like other things", `{"a":"123","b":"true","c":"null","d":"1.5","e":"","f":"yes"}`,
			"a: \"123\"\nb: \"true\"\nc: \"null\"\nd: \"1.5\"\ne: \"\"\nf: yes\n"},
		{"numbers and booleans", `{"factor":2.5,"follow_redirects":true,"max_attempts":12,"n":-3,"x":1e3}`,
			"factor: 2.5\nfollow_redirects: true\nmax_attempts: 12\nn: -3\nx: 1e3\n"},
		{"nested and lists", `{"backoff":{"initial":"30s","max":"1h"},"schedule":["1m","5m"],"escalate":[{"after":"24h","notify":"ops-mail"}]}`,
			"backoff:\n  initial: 30s\n  max: 1h\nescalate:\n  - after: 24h\n    notify: ops-mail\nschedule: [1m, 5m]\n"},
		{"empty list and mapping", `{"endpoints":[],"filter":{}}`, "endpoints: []\nfilter: {}\n"},
		{"several lines", `{"pinned_certificate":"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"}`,
			"pinned_certificate: |\n  -----BEGIN CERTIFICATE-----\n  MIIB\n  -----END CERTIFICATE-----\n"},
		{"no fields", `{}`, ""},
		{"null", `{"fallback":null}`, "fallback: null\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := specYAML([]byte(tc.json))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.yaml {
				t.Errorf("as YAML:\n%s\nwant:\n%s", got, tc.yaml)
			}
			back, err := specJSON(got)
			if err != nil {
				t.Fatalf("read back: %v", err)
			}
			want, _ := specJSON(tc.yaml)
			if string(back) != string(want) {
				t.Errorf("read back %s, want %s", back, want)
			}
			if string(back) != canonical(t, tc.json) {
				t.Errorf("read back %s, want %s", back, canonical(t, tc.json))
			}
		})
	}
}

// canonical is a JSON object as specJSON writes it: keys sorted.
func canonical(t *testing.T, s string) string {
	t.Helper()
	y, err := specYAML([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	out, err := specJSON(y)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), "{") {
		t.Fatalf("not an object: %s", out)
	}
	return string(out)
}

// Typed YAML is read as the configuration file is: scalars keep their
// text, only JSON numbers and true/false become numbers and booleans.
func TestSpecJSON(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want, err string
	}{
		{"flow style", "{transport: http, url: 'https://a.example'}", `{"transport":"http","url":"https://a.example"}`, ""},
		{"comments only", "# nothing yet\n", `{}`, ""},
		{"empty", "", `{}`, ""},
		{"yes stays a string", "follow_redirects: yes\n", `{"follow_redirects":"yes"}`, ""},
		{"hex stays a string", "max_concurrency: 0x10\n", `{"max_concurrency":"0x10"}`, ""},
		{"a date stays a string", "since: 2026-01-02\n", `{"since":"2026-01-02"}`, ""},
		{"anchors and merge keys", "base: &b {timeout: 5s, url: x}\nuse:\n  <<: *b\n  url: y\n",
			`{"base":{"timeout":"5s","url":"x"},"use":{"timeout":"5s","url":"y"}}`, ""},
		{"not YAML", "url: [unclosed\n", "", "the fields are not valid YAML"},
		{"a list", "- a\n- b\n", "", "line 1: the fields must be a mapping"},
		{"a single value", "http\n", "", "must be a mapping"},
		{"a key twice", "url: a\nurl: b\n", "", "line 2: url is given twice (first at line 1)"},
		{"two documents", "url: a\n---\nurl: b\n", "", "line 2: give the fields of one object only"},
		{"a mapping as a key", "? {a: 1}\n: x\n", "", "keys must be plain names"},
		{"merging a value", "a:\n  <<: 3\n", "", "<< merges mappings only"},
		{"an alias in itself", "a: &a [*a]\n", "", "is nested too deeply"},
		{"billion laughs", "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n" +
			"c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n" +
			"e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n", "", "the fields are too many"},
		{"a long text many times", "a: &a " + strings.Repeat("x", 1000) + "\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n" +
			"c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n", "", "the fields are too many"},
		{"a self-merge", "a: &a\n  x: 1\n  <<: *a\n", "", "nested too deeply"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := specJSON(tc.yaml)
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one with %q", err, tc.err)
			case tc.err == "" && err != nil:
				t.Fatal(err)
			case string(got) != tc.want:
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestSpecChanges(t *testing.T) {
	got := specChanges([]byte(`{"transport":"http","url":"https://a","secret":"set","tls":{"ca":"x"},"timeout_on":["timeout"]}`),
		[]byte(`{"transport":"http","url":"https://b","secret":"set","tls":{"ca":"y","cert":"c"},"rate":"10/s"}`))
	want := []fieldChange{
		{Field: "rate", After: "10/s", Added: true},
		{Field: "tls.ca", Before: "x", After: "y"},
		{Field: "tls.cert", After: "c", Added: true},
		{Field: "url", Before: "https://a", After: "https://b"},
		{Field: "timeout_on", Before: "[timeout]", Removed: true},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("change %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	if s := specSummary([]byte(`{"url":"https://a","transport":"http","tls":{"ca":"x"},"to":["a","b"]}`)); s != "tls: {ca: x}, to: [a, b], transport: http, url: https://a" {
		t.Errorf("summary %q", s)
	}
}

// The API's messages about a spec count the lines of the JSON it was
// sent; the form's count those of the YAML typed.
func TestPlaceErrors(t *testing.T) {
	text := "transport: http\nurl: ftp://x\ntls:\n  cert: a.pem\nescalate:\n  - after: 1h\n    notify: nobody\n"
	msg := "line 1: endpoints.acme.url: must be an absolute http or https URL\n" +
		"line 1: endpoints.acme.tls.cert: cannot be read\n" +
		"line 1: endpoints.acme.escalate[0].notify: no such endpoint\n" +
		"line 1: endpoints.acme.timeout: required\n" +
		"line 1: routes.acme.endpoints[0]: endpoint \"acme\" is not defined\n" +
		"endpoints.acme: something without a line"
	got := placeErrors(msg, "endpoint", "acme", text)
	want := "line 2: endpoints.acme.url: must be an absolute http or https URL\n" +
		"line 4: endpoints.acme.tls.cert: cannot be read\n" +
		"line 7: endpoints.acme.escalate[0].notify: no such endpoint\n" +
		"endpoints.acme.timeout: required\n" +
		"routes.acme.endpoints[0]: endpoint \"acme\" is not defined\n" +
		"endpoints.acme: something without a line"
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

func FuzzSpecJSON(f *testing.F) {
	for _, s := range []string{"url: a\n", "a: &x [*x]\n", "<<: {a: 1}\n", "a: {b: [1, 2.5, true, null]}\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		spec, err := specJSON(text)
		if err != nil {
			return
		}
		// What was read shows as YAML that reads back the same.
		y, err := specYAML(spec)
		if err != nil {
			t.Fatalf("%s as YAML: %v", spec, err)
		}
		again, err := specJSON(y)
		if err != nil || string(again) != string(spec) {
			t.Fatalf("%q -> %s -> %q -> %s %v", text, spec, y, again, err)
		}
	})
}
