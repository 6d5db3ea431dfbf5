package http_test

import (
	"testing"
	"time"

	httptransport "github.com/courier-gw/courier/transport/http"
)

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"120", 2 * time.Minute, true},
		{"0", 0, true},
		{" 7 ", 7 * time.Second, true},
		{"86400", 24 * time.Hour, true},
		{"86401", httptransport.MaxRetryAfter, true},
		{"99999999999999999999999999", httptransport.MaxRetryAfter, true},
		{"Sat, 21 Nov 2026 10:01:30 GMT", 90 * time.Second, true},   // IMF-fixdate
		{"Saturday, 21-Nov-26 10:00:05 GMT", 5 * time.Second, true}, // RFC 850
		{"Sat Nov 21 10:00:10 2026", 10 * time.Second, true},        // asctime
		{"Fri, 20 Nov 2026 10:00:00 GMT", 0, true},                  // in the past: now
		{"Fri, 31 Dec 9999 23:59:59 GMT", httptransport.MaxRetryAfter, true},
		{"", 0, false},
		{"-5", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
		{"+3", 0, false},
		{"2026-11-21T10:01:00Z", 0, false},
	} {
		got, ok := httptransport.ParseRetryAfter(tc.in, base)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.wantOK)
		}
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"120", "0", "", "-1", "Sat, 21 Nov 2026 10:01:30 GMT",
		"Saturday, 21-Nov-26 10:00:05 GMT", "Sat Nov 21 10:00:10 2026", "9999999999999999999999", "Mon, 01 Jan 0001 00:00:00 GMT"} {
		f.Add(s, int64(1_795_000_000))
	}
	f.Fuzz(func(t *testing.T, v string, unix int64) {
		d, ok := httptransport.ParseRetryAfter(v, time.Unix(unix, 0))
		if d < 0 || d > httptransport.MaxRetryAfter {
			t.Fatalf("ParseRetryAfter(%q) = %v, outside [0, %v]", v, d, httptransport.MaxRetryAfter)
		}
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v with ok false", v, d)
		}
	})
}
