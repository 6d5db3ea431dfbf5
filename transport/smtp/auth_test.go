package smtp

import (
	netsmtp "net/smtp"
	"testing"
)

func TestAuthFor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		offered, want string
	}{
		{"PLAIN LOGIN", "PLAIN"},
		{"login cram-md5", "LOGIN"},
		{"LOGIN XOAUTH2", "LOGIN"},
		{"CRAM-MD5 XOAUTH2", ""},
	} {
		a, err := authFor(tc.offered, "u", "p", "mx.example")
		if tc.want == "" {
			if err == nil {
				t.Errorf("%q: no error", tc.offered)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.offered, err)
		}
		mech, _, err := a.Start(&netsmtp.ServerInfo{Name: "mx.example", TLS: true})
		if err != nil || mech != tc.want {
			t.Errorf("%q: %s %v, want %s", tc.offered, mech, err, tc.want)
		}
	}
	// Never the password in the clear across a network.
	a, _ := authFor("LOGIN", "u", "p", "mx.example")
	if _, _, err := a.Start(&netsmtp.ServerInfo{Name: "mx.example"}); err == nil {
		t.Error("LOGIN without TLS to another host")
	}
	if _, _, err := a.Start(&netsmtp.ServerInfo{Name: "other.example", TLS: true}); err == nil {
		t.Error("LOGIN to another host than the endpoint's")
	}
}
