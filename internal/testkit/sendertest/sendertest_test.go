package sendertest

import (
	"net"
	"testing"
)

func TestUntouched(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if !Untouched(t, ln) {
		t.Error("a listener nothing connected to is not untouched")
	}
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if Untouched(t, ln) {
		t.Error("a listener a connection reached is untouched")
	}
}
