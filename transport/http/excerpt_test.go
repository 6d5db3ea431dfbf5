package http

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/courier-gw/courier"
)

func TestExcerpt(t *testing.T) {
	t.Parallel()
	max := courier.MaxResponseExcerpt
	euro := strings.Repeat("€", max) // three bytes each
	for _, tc := range []struct {
		name        string
		in          []byte
		more        bool
		size        int64
		contentType string
		want        string
	}{
		{"empty", nil, false, 0, "", ""},
		{"text", []byte("queued"), false, 6, "text/plain", "queued"},
		{"json", []byte(`{"error":"no such customer"}`), false, 28, "application/json", `{"error":"no such customer"}`},
		{"cut rune dropped", []byte(euro[:max]), true, -1, "text/plain", euro[:max-max%3]},
		{"latin-1 repaired", []byte("caf\xe9 cr\xe8me au lait, served hot"), false, 30, "text/plain; charset=iso-8859-1", "caf\uFFFD cr\uFFFDme au lait, served hot"},
		{"binary with size", []byte{0x1f, 0x8b, 8, 0, 0, 0}, false, 6, "application/gzip", "[application/gzip body, 6 bytes]"},
		{"binary without type", []byte{0xff, 0xfe, 0xfd, 0xfc}, true, -1, "", "[binary body, over 4 bytes]"},
	} {
		got := excerpt(tc.in, tc.more, tc.size, tc.contentType)
		if got != tc.want {
			t.Errorf("%s: excerpt = %q, want %q", tc.name, got, tc.want)
		}
		if len(got) > max || !utf8.ValidString(got) {
			t.Errorf("%s: excerpt of %d bytes, valid %v", tc.name, len(got), utf8.ValidString(got))
		}
	}
}

// TestExcerptRepairStaysWithinBound checks that replacing invalid bytes,
// which makes the text longer, never pushes it past the bound.
func TestExcerptRepairStaysWithinBound(t *testing.T) {
	t.Parallel()
	in := []byte(strings.Repeat("abcdefg\xe9", courier.MaxResponseExcerpt/8))
	got := excerpt(in, true, -1, "text/plain")
	if len(got) > courier.MaxResponseExcerpt || !utf8.ValidString(got) {
		t.Fatalf("excerpt of %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
	if !strings.HasPrefix(got, "abcdefg\uFFFDabcdefg") {
		t.Fatalf("excerpt = %q...", got[:20])
	}
}
