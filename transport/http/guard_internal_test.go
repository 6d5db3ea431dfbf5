package http

import (
	"net/netip"
	"testing"
)

func TestGuardCheck(t *testing.T) {
	t.Parallel()
	private := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("169.254.169.254/32")}
	tests := []struct {
		addr    string
		allow   []netip.Prefix
		blocked bool
	}{
		{"93.184.215.14:443", nil, false},
		{"[2606:4700::1111]:443", nil, false},
		{"10.0.0.1:80", nil, true},
		{"10.0.0.1:80", private, false},
		{"169.254.169.254:80", nil, true},
		{"169.254.169.254:80", private, false},
		{"169.254.1.1:80", private, true},
		{"172.16.5.4:80", nil, true},
		{"192.168.1.1:80", nil, true},
		{"100.100.100.200:80", nil, true},
		{"127.0.0.1:80", nil, true},
		{"[::1]:80", nil, true},
		{"[::ffff:10.0.0.1]:80", nil, true},
		{"[::ffff:10.0.0.1]:80", private, false},
		{"[fd00:ec2::254]:80", nil, true},
		{"[fe80::1]:80", nil, true},
		{"[ff02::1]:80", nil, true},
		{"[::]:80", nil, true},
		{"0.0.0.0:80", nil, true},
		{"255.255.255.255:80", nil, true},
		{"not-an-ip:80", nil, true},
	}
	for _, tt := range tests {
		err := guard{allow: tt.allow}.check("tcp", tt.addr, nil)
		if got := err != nil; got != tt.blocked {
			t.Errorf("check(%s, allow %v) = %v, want blocked %v", tt.addr, tt.allow, err, tt.blocked)
		}
	}
}
