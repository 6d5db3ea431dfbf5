package web

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/courier-gw/courier/api"
)

func TestPreview(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, tt := range []struct {
		name     string
		m        api.Message
		kind     string
		text     string
		truncate bool
	}{
		{"json", api.Message{PayloadBase64: b64(`{"a":[1,2],"b":"x"}`), ContentType: "application/json"}, "JSON",
			"{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": \"x\"\n}", false},
		// As stored, not as the API's JSON would write it (\u003c, compacted).
		{"json as stored", api.Message{PayloadBase64: b64(`{ "note": "<b>fish & chips</b>" }`), ContentType: "application/json"}, "JSON",
			"{\n  \"note\": \"<b>fish & chips</b>\"\n}", false},
		{"xml keeps its prefixes", api.Message{PayloadBase64: b64(`<?xml version="1.0"?><inv:Invoice xmlns:inv="urn:i" xmlns:cbc="urn:c"><cbc:ID a="1&amp;2">7</cbc:ID><cbc:Note/><!-- c --></inv:Invoice>`),
			ContentType: "application/xml"}, "XML",
			"<?xml version=\"1.0\"?>\n<inv:Invoice xmlns:inv=\"urn:i\" xmlns:cbc=\"urn:c\">\n  <cbc:ID a=\"1&amp;2\">7</cbc:ID>\n  <cbc:Note/>\n  <!-- c -->\n</inv:Invoice>", false},
		{"broken xml is text", api.Message{PayloadBase64: b64(`<a><b></a>`), ContentType: "application/xml"}, "text", `<a><b></a>`, false},
		{"text", api.Message{PayloadBase64: b64("hello\nworld"), ContentType: "text/plain"}, "text", "hello\nworld", false},
		{"binary", api.Message{PayloadBase64: base64.StdEncoding.EncodeToString([]byte{0xff, 0xfe, 0, 1}), ContentType: "application/pdf"},
			"binary", "00000000  ff fe 00 01", false},
		{"long text is cut", api.Message{PayloadBase64: b64(strings.Repeat("é", maxPreview)), ContentType: "text/plain"}, "text",
			strings.Repeat("é", maxPreview/2), true},
	} {
		p := makePreview(&tt.m)
		if p.Kind != tt.kind || !strings.HasPrefix(p.Text, tt.text) || p.Truncated != tt.truncate {
			t.Errorf("%s: %s %q (truncated %v), want %s %q (truncated %v)", tt.name, p.Kind, p.Text, p.Truncated, tt.kind, tt.text, tt.truncate)
		}
		if tt.kind != "binary" && tt.name != "long text is cut" && p.Text != tt.text {
			t.Errorf("%s: got\n%s\nwant\n%s", tt.name, p.Text, tt.text)
		}
	}
}

// FuzzPreview: any payload of any content type makes a preview, within the
// size bound, and an indented XML preview parses as the payload did.
func FuzzPreview(f *testing.F) {
	f.Add([]byte(`<a:b xmlns:a="u" c="1"><d>x</d><e/><!--c--></a:b>`), "application/xml")
	f.Add([]byte(`{"a":[1,{"b":null}]}`), "application/json")
	f.Add([]byte{0xff, 0, 1}, "application/octet-stream")
	f.Add([]byte(`<?xml version="1.0"?><!DOCTYPE x><x>&amp;</x>`), "text/xml")
	f.Fuzz(func(t *testing.T, payload []byte, contentType string) {
		m := &api.Message{ContentType: contentType, PayloadBase64: base64.StdEncoding.EncodeToString(payload), Size: len(payload)}
		p := makePreview(m)
		if p.Size != len(payload) || len(p.Text) > maxPreview || (len(payload) > 0 && p.Text == "") {
			t.Fatalf("preview of %q: size %d, %d bytes of text", payload, p.Size, len(p.Text))
		}
		if p.Kind == "XML" && !p.Truncated {
			var buf bytes.Buffer
			if err := indentXML(&buf, []byte(p.Text)); err != nil {
				t.Fatalf("the indented XML of %q does not parse: %v\n%s", payload, err, p.Text)
			}
		}
	})
}
