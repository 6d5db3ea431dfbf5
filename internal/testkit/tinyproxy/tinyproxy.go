// Package tinyproxy runs a real forward proxy, tinyproxy, for the tests of
// outbound proxies: on a free loopback port, with a configuration file of
// its own, until the test ends.
package tinyproxy

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/courier-gw/courier/internal/testkit/syncbuf"

	"github.com/courier-gw/courier/internal/testkit/testenv"
)

// Out is the address the proxy opens its connections to receivers from
// (its Bind): a receiver that sees it knows a request came through the
// proxy, since connections made directly on loopback come from 127.0.0.1.
const Out = "127.0.0.2"

// Proxy is a running tinyproxy.
type Proxy struct {
	Addr    string // host:port it listens on
	LogFile string
}

// URL is the proxy's http:// URL, with user and password when given.
func (p *Proxy) URL(userPassword ...string) string {
	if len(userPassword) == 2 {
		return "http://" + userPassword[0] + ":" + userPassword[1] + "@" + p.Addr
	}
	return "http://" + p.Addr
}

// Log returns what the proxy logged so far.
func (p *Proxy) Log() string {
	b, _ := os.ReadFile(p.LogFile)
	return string(b)
}

// Start runs tinyproxy, the binary COURIER_TEST_TINYPROXY names (the test
// skips without it, or fails when CI is set). auth, when given, is the user
// and password it requires.
func Start(t testing.TB, auth ...string) *Proxy {
	t.Helper()
	bin := testenv.Tinyproxy(t)
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	p := &Proxy{Addr: addr, LogFile: filepath.Join(dir, "tinyproxy.log")}
	conf := fmt.Sprintf("Port %s\nListen 127.0.0.1\nBind %s\nTimeout 30\nLogLevel Info\nMaxClients 20\nLogFile %q\nPidFile %q\n",
		port, Out, p.LogFile, filepath.Join(dir, "tinyproxy.pid"))
	if len(auth) == 2 {
		conf += fmt.Sprintf("BasicAuth %s %s\n", auth[0], auth[1])
	}
	confFile := filepath.Join(dir, "tinyproxy.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-d", "-c", confFile)
	var out syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start tinyproxy: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("tinyproxy did not listen on %s: %v\n%s", addr, err, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
