package courier_test

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

var (
	claimSecret = bytes.Repeat([]byte{7}, 32)
	claimNow    = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	claimDigest = strings.Repeat("ab", 32)
)

func claimOf(key string) courier.ClaimTicket {
	return courier.ClaimTicket{Key: key, Endpoint: "acme", Digest: claimDigest, Expires: claimNow.Add(time.Hour)}
}

func TestClaimURLVerifies(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"inv-1", "inv:2026.1", "order-7/erp-orders"} {
		c := claimOf(key)
		raw := courier.ClaimURL("https://courier.example.org/", claimSecret, c)
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("ClaimURL %q: %v", raw, err)
		}
		if got, want := u.Path, "/v1/claims/"+key; got != want {
			t.Errorf("path %q, want %q", got, want)
		}
		got, sig, err := courier.ParseClaim(strings.TrimPrefix(u.Path, "/v1/claims/"), u.Query().Get)
		if err != nil {
			t.Fatalf("ParseClaim of %s: %v", raw, err)
		}
		if got != c {
			t.Errorf("ParseClaim = %+v, want %+v", got, c)
		}
		if err := courier.VerifyClaim(claimSecret, got, sig, claimNow); err != nil {
			t.Errorf("VerifyClaim of %s: %v", raw, err)
		}
	}
}

// Every change of what a URL grants, or of who signs it, or of when it is
// used, is refused with permission_denied.
func TestVerifyClaimRefuses(t *testing.T) {
	t.Parallel()
	c := claimOf("inv-1")
	sig := courier.ClaimToken(claimSecret, c)
	tests := []struct {
		name   string
		change func(c *courier.ClaimTicket, sig *string, secret *[]byte, now *time.Time)
		want   string
	}{
		{"other message", func(c *courier.ClaimTicket, _ *string, _ *[]byte, _ *time.Time) { c.Key = "inv-2" }, "does not match"},
		{"other delivery", func(c *courier.ClaimTicket, _ *string, _ *[]byte, _ *time.Time) { c.Key = "inv-1/sub" }, "does not match"},
		{"other endpoint", func(c *courier.ClaimTicket, _ *string, _ *[]byte, _ *time.Time) { c.Endpoint = "acme2" }, "does not match"},
		{"other digest", func(c *courier.ClaimTicket, _ *string, _ *[]byte, _ *time.Time) { c.Digest = strings.Repeat("cd", 32) }, "does not match"},
		{"later expiry", func(c *courier.ClaimTicket, _ *string, _ *[]byte, _ *time.Time) {
			c.Expires = c.Expires.Add(time.Second)
		}, "does not match"},
		{"changed signature", func(_ *courier.ClaimTicket, sig *string, _ *[]byte, _ *time.Time) { *sig = "A" + (*sig)[1:] }, "does not match"},
		{"empty signature", func(_ *courier.ClaimTicket, sig *string, _ *[]byte, _ *time.Time) { *sig = "" }, "does not match"},
		{"other secret", func(_ *courier.ClaimTicket, _ *string, secret *[]byte, _ *time.Time) {
			*secret = bytes.Repeat([]byte{8}, 32)
		}, "does not match"},
		// Fields that run into each other sign differently.
		{"shifted fields", func(c *courier.ClaimTicket, _ *string, _ *[]byte, _ *time.Time) {
			c.Key, c.Endpoint = "inv-1\n4:acme", ""
		}, "does not match"},
		{"at expiry", func(_ *courier.ClaimTicket, _ *string, _ *[]byte, now *time.Time) { *now = claimNow.Add(time.Hour) }, "expired at 2026-11-25T13:00:00Z"},
		{"after expiry", func(_ *courier.ClaimTicket, _ *string, _ *[]byte, now *time.Time) {
			*now = claimNow.Add(48 * time.Hour)
		}, "expired"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, sig, secret, now := c, sig, claimSecret, claimNow
			tt.change(&c, &sig, &secret, &now)
			err := courier.VerifyClaim(secret, c, sig, now)
			if courier.ErrorCode(err) != courier.CodePermissionDenied || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("VerifyClaim = %v, want permission_denied saying %q", err, tt.want)
			}
		})
	}
}

func TestParseClaimNeedsEveryParameter(t *testing.T) {
	t.Parallel()
	full := url.Values{"endpoint": {"acme"}, "expires": {"1764072000"}, "sha256": {claimDigest}, "sig": {"x"}}
	for _, leave := range []string{"endpoint", "expires", "sha256", "sig"} {
		q := url.Values{}
		for k, v := range full {
			if k != leave {
				q[k] = v
			}
		}
		if _, _, err := courier.ParseClaim("inv-1", q.Get); courier.ErrorCode(err) != courier.CodePermissionDenied {
			t.Errorf("without %s: %v, want permission_denied", leave, err)
		}
	}
	bad := url.Values{"endpoint": {"acme"}, "expires": {"soon"}, "sha256": {claimDigest}, "sig": {"x"}}
	if _, _, err := courier.ParseClaim("inv-1", bad.Get); courier.ErrorCode(err) != courier.CodePermissionDenied {
		t.Errorf("expires=soon: %v, want permission_denied", err)
	}
}

func TestClaimCheckApplies(t *testing.T) {
	t.Parallel()
	cc := &courier.ClaimCheck{Above: 10}
	tests := []struct {
		name string
		cc   *courier.ClaimCheck
		m    *courier.Message
		want bool
	}{
		{"no claim check", nil, &courier.Message{Payload: make([]byte, 100)}, false},
		{"inline at the threshold", cc, &courier.Message{Payload: make([]byte, 10)}, false},
		{"inline above", cc, &courier.Message{Payload: make([]byte, 11)}, true},
		{"blob above", cc, &courier.Message{Blob: "b", Size: 11}, true},
		{"blob at the threshold", cc, &courier.Message{Blob: "b", Size: 10}, false},
	}
	for _, tt := range tests {
		if got := tt.cc.Applies(tt.m); got != tt.want {
			t.Errorf("%s: Applies = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestClaimNoticeFor(t *testing.T) {
	t.Parallel()
	m := &courier.Message{ID: "big", Type: "scan", Blob: "ref", Size: 5 << 20, Digest: claimDigest, ContentType: "application/pdf",
		Headers: map[string]string{"X-Tenant": "acme"}}
	exp := claimNow.Add(time.Hour)
	n := courier.ClaimNoticeFor(m, "https://c.example/v1/claims/big?sig=x", exp)
	if n.Blob != "" || n.Digest != "" || n.ContentType != courier.ClaimNoticeType || n.Size != len(n.Payload) ||
		n.ID != "big" || n.Type != "scan" || n.Headers["X-Tenant"] != "acme" {
		t.Errorf("notice message %+v", n)
	}
	if m.Blob != "ref" || m.Payload != nil || m.ContentType != "application/pdf" {
		t.Errorf("the message changed: %+v", m)
	}
	var got courier.ClaimNotice
	if err := json.Unmarshal(n.Payload, &got); err != nil {
		t.Fatal(err)
	}
	want := courier.ClaimNoticeBody{URL: "https://c.example/v1/claims/big?sig=x", ExpiresAt: exp, MessageID: "big",
		Size: 5 << 20, ContentType: "application/pdf", SHA256: claimDigest}
	if got.ClaimCheck != want {
		t.Errorf("notice %s\n got %+v\nwant %+v", n.Payload, got.ClaimCheck, want)
	}
	inline := courier.ClaimNoticeFor(&courier.Message{ID: "small", Payload: []byte("hello")}, "u", exp)
	if err := json.Unmarshal(inline.Payload, &got); err != nil {
		t.Fatal(err)
	}
	if got.ClaimCheck.SHA256 != courier.PayloadDigest([]byte("hello")) || got.ClaimCheck.Size != 5 ||
		got.ClaimCheck.ContentType != "application/octet-stream" {
		t.Errorf("notice of an inline payload %s", inline.Payload)
	}
}
