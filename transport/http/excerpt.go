package http

import (
	"fmt"
	"io"
	"mime"
	"strings"
	"unicode/utf8"

	"github.com/courier-gw/courier"
)

// readBody reads the start of a response body for the attempt record and
// up to maxDrain bytes more, so the connection can be reused, and keeps the
// first keep bytes of the body, as a workflow needs of a step's answer. Only
// those and the drain are read: a keep of 0 reads no more than the excerpt
// needs. The error is that of reading within those bounds; a body longer
// than them is cut without one (closing it then costs the connection, not
// the attempt).
func readBody(body io.Reader, contentType string, keep int, maxDrain int64) (string, []byte, error) {
	buf := make([]byte, max(keep, courier.MaxResponseExcerpt))
	// Not io.ReadFull: it reports a short body as io.ErrUnexpectedEOF, the
	// very error by which a body cut short by the receiver shows.
	n := 0
	// cut makes the excerpt of what was read; more says the body goes on
	// past it, size is the body's length or -1.
	cut := func(more bool, size int64) string {
		p := buf[:n]
		if len(p) > courier.MaxResponseExcerpt {
			p, more = p[:courier.MaxResponseExcerpt], true
		}
		return excerpt(p, more, size, contentType)
	}
	kept := func() []byte { return buf[:min(n, keep)] }
	for n < len(buf) {
		m, err := body.Read(buf[n:])
		n += m
		if err == io.EOF {
			return cut(false, int64(n)), kept(), nil
		}
		if err != nil {
			return cut(true, -1), kept(), err
		}
	}
	drained, err := io.CopyN(io.Discard, body, maxDrain)
	switch err {
	case io.EOF:
		return cut(drained > 0, int64(n)+drained), kept(), nil
	case nil:
		return cut(true, -1), kept(), nil
	}
	return cut(true, -1), kept(), err
}

// excerpt turns the first bytes of a body into text for people: valid UTF-8
// of at most courier.MaxResponseExcerpt bytes, never ending in half a
// character. A body that is not text is summarised instead of mangled.
// size is the body's length, or -1 when it is not known.
func excerpt(p []byte, more bool, size int64, contentType string) string {
	if len(p) == 0 {
		return ""
	}
	if more {
		p = trimPartialRune(p)
	}
	if looksBinary(p) {
		what := "binary body"
		if mt, _, err := mime.ParseMediaType(contentType); err == nil {
			what = mt + " body"
		}
		if size >= 0 {
			return fmt.Sprintf("[%s, %d bytes]", what, size)
		}
		return fmt.Sprintf("[%s, over %d bytes]", what, len(p))
	}
	s := strings.ToValidUTF8(string(p), "\uFFFD")
	if len(s) > courier.MaxResponseExcerpt {
		// Replacement characters are longer than the bytes they replace.
		s = string(trimPartialRune([]byte(s[:courier.MaxResponseExcerpt])))
	}
	return s
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of p, as
// left by cutting a body at a byte count.
func trimPartialRune(p []byte) []byte {
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax; i-- {
		if utf8.RuneStart(p[i]) {
			if !utf8.FullRune(p[i:]) {
				return p[:i]
			}
			return p
		}
	}
	return p
}

// looksBinary reports whether p is not text: it holds a NUL, or more than
// one in eight of its characters are invalid UTF-8 or control characters.
func looksBinary(p []byte) bool {
	var chars, bad int
	for len(p) > 0 {
		r, size := utf8.DecodeRune(p)
		p = p[size:]
		chars++
		switch {
		case r == 0:
			return true
		case r == utf8.RuneError && size == 1,
			r < ' ' && r != '\n' && r != '\r' && r != '\t',
			r == 0x7f:
			bad++
		}
	}
	return bad*8 > chars
}
