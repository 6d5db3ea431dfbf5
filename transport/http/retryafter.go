package http

import (
	"net/http"
	"strings"
	"time"
)

// MaxRetryAfter caps what a receiver's Retry-After may ask for, so that a
// typo or a hostile receiver cannot park an endpoint for years.
const MaxRetryAfter = 24 * time.Hour

// ParseRetryAfter reads a Retry-After header value (RFC 9110 §10.2.3):
// delay seconds or an HTTP-date, taken relative to now. A date in the past
// means "now" (0); the result is never negative and at most MaxRetryAfter.
// It reports false for an empty or malformed value.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		const maxSecs = int64(MaxRetryAfter / time.Second)
		var secs int64
		for i := 0; i < len(v); i++ {
			secs = secs*10 + int64(v[i]-'0')
			if secs > maxSecs {
				return MaxRetryAfter, true
			}
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now) // saturates rather than overflows for far dates
	return min(max(d, 0), MaxRetryAfter), true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
