package web

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/courier-gw/courier/api"
)

// maxPreview bounds the payload shown on a message's page.
const maxPreview = 64 << 10

// preview is a payload made readable: JSON and XML indented, other text as
// it is, binary as the hex of its start.
type preview struct {
	Kind      string // JSON, XML, text or binary
	Text      string
	Size      int  // the payload's size in bytes, as stored
	Truncated bool // Text shows only the start
	// Download is set for a payload too large to show (over 1 MiB): the
	// page links to it instead.
	Download bool
}

// payload streams a message's payload through, for a payload too large to
// show on its page.
func (h *Handler) payload(w http.ResponseWriter, r *http.Request, s *session) {
	body, header, err := h.client(s).Payload(r.Context(), r.PathValue("id"))
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	defer body.Close()
	for _, k := range []string{"Content-Type", "Content-Length", api.HeaderSHA256} {
		if v := header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	// Saved, not shown: the browser must not render what a sender sent.
	w.Header().Set("Content-Disposition", `attachment; filename="`+safeFileName(r.PathValue("id"))+`"`)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	io.Copy(w, body)
}

// safeFileName keeps the characters of a message id that are safe in a
// quoted file name.
func safeFileName(id string) string {
	return strings.Map(func(r rune) rune {
		if r == '"' || r == '\\' || r < ' ' || r > '~' {
			return '_'
		}
		return r
	}, id)
}

// makePreview previews a message's payload. The dashboard asks for it as
// stored (base64), so that the text shown is the payload's, not the API's
// JSON encoding of it, which is compacted and escapes <, > and &; Size is
// the message's, as stored.
func makePreview(m *api.Message) preview {
	if m.PayloadURL != "" {
		return preview{Kind: "large", Size: m.Size, Download: true}
	}
	raw, err := base64.StdEncoding.DecodeString(m.PayloadBase64)
	if err != nil {
		return preview{Kind: "binary", Text: "(the payload could not be decoded)", Size: m.Size}
	}
	p := preview{Size: m.Size}
	var buf bytes.Buffer
	switch {
	case json.Valid(raw) && json.Indent(&buf, raw, "", "  ") == nil:
		p.Kind, p.Text = "JSON", buf.String()
	case looksXML(m.ContentType, raw) && indentXML(&buf, raw) == nil:
		p.Kind, p.Text = "XML", buf.String()
	case utf8.Valid(raw):
		p.Kind, p.Text = "text", string(raw)
	default:
		p.Kind = "binary"
		n := min(len(raw), 512)
		p.Text = hex.Dump(raw[:n])
		p.Truncated = n < len(raw)
	}
	if len(p.Text) > maxPreview {
		cut := maxPreview
		for cut > 0 && !utf8.RuneStart(p.Text[cut]) {
			cut--
		}
		p.Text, p.Truncated = p.Text[:cut], true
	}
	return p
}

func looksXML(contentType string, raw []byte) bool {
	return strings.Contains(contentType, "xml") || bytes.HasPrefix(bytes.TrimSpace(raw), []byte("<"))
}

// indentXML writes raw XML indented, element by element, keeping the
// prefixes as written (encoding/xml's encoder would rewrite namespaces).
// An element holding only text stays on one line.
func indentXML(w *bytes.Buffer, raw []byte) error {
	d := xml.NewDecoder(bytes.NewReader(raw))
	d.Strict = true
	depth := 0
	var open *xml.StartElement // a start tag not yet written: it may be empty or hold text only
	var text []byte            // the text of open
	var names []string         // the elements open, innermost last
	name := func(n xml.Name) string {
		if n.Space != "" {
			return n.Space + ":" + n.Local
		}
		return n.Local
	}
	indent := func(d int) {
		if w.Len() > 0 {
			w.WriteByte('\n')
		}
		w.WriteString(strings.Repeat("  ", d))
	}
	writeStart := func(e *xml.StartElement, d int, end string) {
		indent(d)
		w.WriteString("<" + name(e.Name))
		for _, a := range e.Attr {
			w.WriteString(" " + name(a.Name) + `="`)
			xml.EscapeText(w, []byte(a.Value))
			w.WriteString(`"`)
		}
		w.WriteString(end)
	}
	flush := func() {
		if open != nil {
			writeStart(open, depth-1, ">")
			if len(bytes.TrimSpace(text)) > 0 {
				indent(depth)
				xml.EscapeText(w, bytes.TrimSpace(text))
			}
			open, text = nil, nil
		}
	}
	for {
		tok, err := d.RawToken()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			flush()
			e := t.Copy()
			open = &e
			names = append(names, name(e.Name))
			depth++
		case xml.EndElement:
			// RawToken does not match end tags with start tags: this does.
			if len(names) == 0 || names[len(names)-1] != name(t.Name) {
				return errors.New("mismatched end tag")
			}
			names = names[:len(names)-1]
			depth--
			if open != nil {
				if trimmed := bytes.TrimSpace(text); len(trimmed) > 0 {
					writeStart(open, depth, ">")
					xml.EscapeText(w, trimmed)
					w.WriteString("</" + name(t.Name) + ">")
				} else {
					writeStart(open, depth, "/>")
				}
				open, text = nil, nil
				continue
			}
			indent(depth)
			w.WriteString("</" + name(t.Name) + ">")
		case xml.CharData:
			if open != nil {
				text = append(text, t...)
				continue
			}
			if trimmed := bytes.TrimSpace(t); len(trimmed) > 0 {
				indent(depth)
				xml.EscapeText(w, trimmed)
			}
		case xml.Comment:
			flush()
			indent(depth)
			w.WriteString("<!--" + string(t) + "-->")
		case xml.ProcInst:
			flush()
			indent(depth)
			w.WriteString(fmt.Sprintf("<?%s %s?>", t.Target, t.Inst))
		case xml.Directive:
			flush()
			indent(depth)
			w.WriteString("<!" + string(t) + ">")
		}
	}
	if depth != 0 {
		return errors.New("unclosed element")
	}
	return nil
}
