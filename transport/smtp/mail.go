package smtp

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/quotedprintable"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/courier-gw/courier"
)

// Compose renders the mail of one attempt: headers carrying the message's
// id and type, and the payload inline when it is text (text/* in UTF-8 or
// a declared charset), else as an attachment named after the message. A
// notice becomes a mail written for people. publicURL, when set, gives
// notices a link to the message in the dashboard.
//
// Text travels quoted-printable, so its line breaks arrive as CRLF as mail
// requires; attachments travel base64 and arrive byte for byte.
//
// Compose renders a payload held in memory. A payload that is a blob is
// always an attachment, which Send encodes as it streams from the store;
// Compose refuses it rather than read it whole.
func Compose(d courier.Delivery, now time.Time, hostname, publicURL string) ([]byte, error) {
	if d.Message.HasBlob() {
		return nil, fmt.Errorf("the payload of message %s is a blob, which is streamed as the mail is sent", d.Message.ID)
	}
	c, err := compose(d, now, hostname, publicURL)
	return c.head, err
}

// composed is a mail as compose renders it: whole in head, or for a
// payload that is a blob, head and tail around the attachment's base64,
// which is encoded as the blob is read.
type composed struct {
	head, tail []byte
	blob       bool
}

// writeTo writes the mail to w, encoding blob, when the mail has one, in
// base64 lines of 76 characters between head and tail.
func (c composed) writeTo(w io.Writer, blob io.Reader) error {
	if _, err := w.Write(c.head); err != nil {
		return err
	}
	if !c.blob {
		return nil
	}
	enc := base64.NewEncoder(base64.StdEncoding, &lineWriter{w: w})
	if _, err := io.Copy(enc, blob); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	_, err := w.Write(c.tail)
	return err
}

// compose renders the mail of Compose, for a blob without reading it.
func compose(d courier.Delivery, now time.Time, hostname, publicURL string) (composed, error) {
	m, e, attempt := d.Message, d.Endpoint, d.Attempt
	h := &header{}
	h.add("From", settingsOf(e).From)
	h.add("To", strings.Join(settingsOf(e).To, ", "))
	h.add("Date", now.Format(time.RFC1123Z))
	h.add("Message-ID", messageID(d.DeliveryID(), hostname)) // each delivery its own, as webhook-id
	h.add("MIME-Version", "1.0")
	// Automated mail: no out-of-office replies to it (RFC 3834).
	h.add("Auto-Submitted", "auto-generated")
	h.add("Courier-Message-Id", m.ID)
	h.add("Courier-Type", m.Type)
	h.add("Courier-Attempt", strconv.Itoa(attempt))
	if m.Sequence != 0 {
		h.add("Courier-Sequence", strconv.FormatInt(m.Sequence, 10))
		if m.PreviousID != "" {
			h.add("Courier-Previous-Id", m.PreviousID)
		}
	}

	if m.Type == courier.NoticeType {
		var n courier.NoticeBody
		if err := json.Unmarshal(m.Payload, &n); err == nil && n.MessageID != "" {
			h.add("Courier-Notice", n.Notice)
			h.add("Subject", noticeSubject(&n))
			h.add("Content-Type", "text/plain; charset=utf-8")
			h.add("Content-Transfer-Encoding", "quoted-printable")
			return composed{head: finish(h, qp([]byte(noticeText(&n, publicURL))))}, nil
		}
	}

	subject := fmt.Sprintf("%s %s", m.Type, m.ID)
	keys := make([]string, 0, len(m.Headers))
	for k := range m.Headers {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := m.Headers[k]
		if !courier.ValidHeaderName(k) || !courier.ValidHeaderValue(v) {
			return composed{}, fmt.Errorf("message header %q cannot be sent in a mail", clip(k, 64))
		}
		if len(k) > maxHeaderName {
			return composed{}, fmt.Errorf("message header %q cannot be sent in a mail: a name of %d bytes leaves no room on its line (at most %d)", clip(k, 64), len(k), maxHeaderName)
		}
		switch {
		case strings.EqualFold(k, "Subject"):
			subject = v // the sender may name its mail
		case !reservedHeader(k):
			h.add(k, v)
		}
	}
	h.add("Subject", subject)

	ct := m.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return composed{}, fmt.Errorf("content type %q cannot be sent in a mail: %v", clip(ct, 64), err)
	}
	// A blob is always an attachment: text inline would have to be read
	// whole to be checked and encoded.
	if !m.HasBlob() && strings.HasPrefix(mt, "text/") && (params["charset"] != "" || utf8.Valid(m.Payload)) {
		if params["charset"] == "" {
			params["charset"] = "utf-8"
		}
		h.add("Content-Type", mime.FormatMediaType(mt, params))
		h.add("Content-Transfer-Encoding", "quoted-printable")
		return composed{head: finish(h, qp(m.Payload))}, nil
	}

	boundary := newBoundary()
	h.add("Content-Type", mime.FormatMediaType("multipart/mixed", map[string]string{"boundary": boundary}))
	var b bytes.Buffer
	b.WriteString("This is a message in MIME format.\r\n")
	fmt.Fprintf(&b, "\r\n--%s\r\n", boundary)
	b.WriteString("Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n")
	size := len(m.Payload)
	if m.HasBlob() {
		size = m.Size
	}
	b.Write(qp([]byte(fmt.Sprintf("Message %s of type %s is attached (%s, %d bytes).\n", m.ID, m.Type, mt, size))))
	fmt.Fprintf(&b, "\r\n--%s\r\n", boundary)
	fmt.Fprintf(&b, "Content-Type: %s\r\n", mime.FormatMediaType(mt, params))
	fmt.Fprintf(&b, "Content-Disposition: %s\r\n", mime.FormatMediaType("attachment", map[string]string{"filename": attachmentName(m.ID, mt)}))
	b.WriteString("Content-Transfer-Encoding: base64\r\n\r\n")
	tail := fmt.Sprintf("\r\n--%s--\r\n", boundary)
	if m.HasBlob() {
		return composed{head: finish(h, b.Bytes()), tail: []byte(tail), blob: true}, nil
	}
	b.Write(base64Lines(m.Payload))
	b.WriteString(tail)
	return composed{head: finish(h, b.Bytes())}, nil
}

// header collects header fields in order. Values that are not plain ASCII,
// or too long for one line of mail (998 bytes), are written as RFC 2047
// encoded words on folded lines; a mail program joins them back.
type header struct{ b bytes.Buffer }

// maxHeaderName is the longest header name that still fits a mail line
// (998 bytes) with ": " and the longest encoded word (75 bytes) after it: a
// name cannot be folded, a value can.
const maxHeaderName = 998 - len(": ") - 75

func (h *header) add(k, v string) {
	switch {
	case !isASCII(v):
		v = strings.ReplaceAll(mime.QEncoding.Encode("utf-8", v), "?= =?", "?=\r\n =?")
	case len(k)+2+len(v) > 998:
		v = bWords(v)
	}
	h.b.WriteString(k)
	h.b.WriteString(": ")
	h.b.WriteString(v)
	h.b.WriteString("\r\n")
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// bWords writes s as base64 encoded words of 45 bytes each, one per folded
// line.
func bWords(s string) string {
	var words []string
	for len(s) > 0 {
		n := min(45, len(s))
		words = append(words, "=?utf-8?b?"+base64.StdEncoding.EncodeToString([]byte(s[:n]))+"?=")
		s = s[n:]
	}
	return strings.Join(words, "\r\n ")
}

func finish(h *header, body []byte) []byte {
	h.b.WriteString("\r\n")
	h.b.Write(body)
	return h.b.Bytes()
}

// reservedHeader reports whether the transport owns the header name k: the
// addressing (a message must not add recipients), the framing, and
// courier's own.
func reservedHeader(k string) bool {
	k = strings.ToLower(k)
	if strings.HasPrefix(k, "content-") || strings.HasPrefix(k, "courier-") || strings.HasPrefix(k, "webhook-") {
		return true
	}
	switch k {
	case "from", "to", "cc", "bcc", "sender", "date", "message-id", "mime-version", "received",
		"return-path", "auto-submitted", "resent-to", "resent-cc", "resent-bcc", "resent-from", "resent-sender":
		return true
	}
	return false
}

// messageID is the Message-ID of every attempt of a delivery (its
// DeliveryID, as webhook-id over HTTP), so that a mail program can tell a
// repeated attempt from a new message. Ids that are no
// dot-atom (they may hold ':') are hashed.
func messageID(id, hostname string) string {
	local := id
	if strings.ContainsAny(id, ":") || strings.HasPrefix(id, ".") || strings.HasSuffix(id, ".") || strings.Contains(id, "..") {
		sum := sha256.Sum256([]byte(id))
		local = hex.EncodeToString(sum[:16])
	}
	return "<" + local + ".courier@" + hostname + ">"
}

// attachmentName is the file name of a payload sent as an attachment.
func attachmentName(id, mediaType string) string {
	name := strings.ReplaceAll(id, ":", "_")
	switch {
	case mediaType == "application/json" || strings.HasSuffix(mediaType, "+json"):
		return name + ".json"
	case mediaType == "application/xml" || strings.HasSuffix(mediaType, "+xml"):
		return name + ".xml"
	case mediaType == "application/pdf":
		return name + ".pdf"
	case mediaType == "application/zip":
		return name + ".zip"
	case mediaType == "application/edifact":
		return name + ".edi"
	}
	return name + ".bin"
}

// qp encodes text quoted-printable with CRLF line breaks. Mail ends in a
// line break; a text that does not gets a soft one, which decodes to
// nothing, so that the receiver's text ends where the payload ends.
//
// Line breaks are made LF before encoding: the encoder forgets a lone CR
// when an encoded byte follows it and then takes the next LF for the rest
// of a CRLF, so "\r\x7f\n" would lose its second line break.
func qp(p []byte) []byte {
	if bytes.IndexByte(p, '\r') >= 0 {
		p = bytes.ReplaceAll(p, []byte("\r\n"), []byte("\n"))
		p = bytes.ReplaceAll(p, []byte("\r"), []byte("\n"))
	}
	var b bytes.Buffer
	w := quotedprintable.NewWriter(&b)
	w.Write(p)
	w.Close()
	if b.Len() > 0 && !bytes.HasSuffix(b.Bytes(), []byte("\r\n")) {
		b.WriteString("=\r\n")
	}
	return b.Bytes()
}

// base64Lines encodes p in base64 lines of 76 characters.
func base64Lines(p []byte) []byte {
	enc := base64.StdEncoding.EncodeToString(p)
	var b bytes.Buffer
	for len(enc) > 76 {
		b.WriteString(enc[:76])
		b.WriteString("\r\n")
		enc = enc[76:]
	}
	b.WriteString(enc)
	return b.Bytes()
}

// lineWriter breaks what is written to it (base64) into lines of 76
// characters joined by CRLF, as base64Lines does, with no line break after
// the last.
type lineWriter struct {
	w   io.Writer
	col int // characters on the line being written
}

func (l *lineWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		if l.col == 76 {
			if _, err := io.WriteString(l.w, "\r\n"); err != nil {
				return written, err
			}
			l.col = 0
		}
		n := min(76-l.col, len(p))
		if _, err := l.w.Write(p[:n]); err != nil {
			return written, err
		}
		l.col += n
		written += n
		p = p[n:]
	}
	return written, nil
}

func newBoundary() string {
	var r [15]byte
	rand.Read(r[:])
	return "courier-" + hex.EncodeToString(r[:])
}

// noticeSubject says in a line what a notice is about.
func noticeSubject(n *courier.NoticeBody) string {
	switch n.Notice {
	case "escalation":
		return fmt.Sprintf("[courier] %s %s not delivered after %s (route %s)", n.Type, n.MessageID, age(n), n.Route)
	case "fallback":
		return fmt.Sprintf("[courier] %s %s goes to fallback route %s after %s", n.Type, n.MessageID, n.Route, age(n))
	case "suspended":
		return fmt.Sprintf("[courier] %s %s suspended (%s) on route %s", n.Type, n.MessageID, n.Reason, n.Route)
	}
	return fmt.Sprintf("[courier] %s: %s %s", n.Notice, n.Type, n.MessageID)
}

// noticeText writes a notice for people: what happened, to which message
// on which route, how long it has waited, the last error, and where to
// look.
func noticeText(n *courier.NoticeBody, publicURL string) string {
	var b strings.Builder
	b.WriteString(n.Text)
	b.WriteString("\n\n")
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "%-12s %s\n", k, v)
		}
	}
	row("Message", n.MessageID)
	row("Type", n.Type)
	route := n.Route
	if n.OriginRoute != "" {
		route += " (fell back from " + n.OriginRoute + ")"
	}
	row("Route", route)
	state := string(n.State)
	if n.Reason != "" {
		state += " (" + string(n.Reason) + ")"
	}
	row("State", state)
	row("Waiting", fmt.Sprintf("%s, since %s", age(n), n.CreatedAt.UTC().Format("2006-01-02 15:04:05 UTC")))
	row("Attempts", strconv.Itoa(n.Attempts))
	row("Endpoint", n.Endpoint)
	lastErr := n.LastError
	if n.LastClass != "" && lastErr != "" {
		lastErr = string(n.LastClass) + ": " + lastErr
	}
	row("Last error", lastErr)
	if publicURL != "" {
		b.WriteString("\n")
		row("Dashboard", strings.TrimRight(publicURL, "/")+"/ui/messages/"+url.PathEscape(n.MessageID))
	}
	fmt.Fprintf(&b, "\nThis %s notice was sent by courier at %s.\n", n.Notice, n.NoticeAt.UTC().Format("2006-01-02 15:04:05 UTC"))
	return b.String()
}

// age says how long the message has waited, to the minute (to the second
// below a minute).
func age(n *courier.NoticeBody) string {
	d := time.Duration(n.AgeSeconds) * time.Second
	if d >= time.Minute {
		d = d.Round(time.Minute)
	}
	return d.String()
}

// validDomain reports whether s can stand in EHLO and on the right of a
// Message-ID: dot-separated labels of letters, digits and hyphens.
func validDomain(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}
