package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
)

// The README's tour is what a new user runs first, so it must say what
// happens. TestTourAsWritten reads the tour's commands from README.md
// itself and runs them in order, as a user would in a scratch directory,
// with the tour's Python receiver as a process of its own; after each it
// checks what the tour says happens. A command the test does not expect,
// or one it expects that the tour no longer has, fails it: the README and
// this test change together.

// readmePath is the README, from this package's directory.
const readmePath = "../../README.md"

// tourSection returns the text of the README's tour: from its heading to
// the next heading of the same level.
func tourSection(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start := strings.Index(text, "\n## A five-minute tour\n")
	if start < 0 {
		t.Fatal("README.md has no section \"## A five-minute tour\"")
	}
	text = text[start+1:]
	if end := strings.Index(text[3:], "\n## "); end >= 0 {
		text = text[:end+3]
	}
	return text
}

// tourCommand is one command of the tour: a shell command from an indented
// code block, or the whole of a fenced block (a file to write).
type tourCommand struct {
	text  string
	fence string // the fenced block's info string ("yaml"); empty for a shell command
}

// tourCommands splits the tour's code blocks into commands. An indented
// block holds shell commands, one a line, where a line that ends in | or \
// or leaves a quote open goes on in the next; a fenced block is one
// command.
func tourCommands(section string) []tourCommand {
	var cmds []tourCommand
	lines := strings.Split(section, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		switch {
		case strings.HasPrefix(line, "```"):
			info := strings.TrimPrefix(line, "```")
			var body []string
			for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
				body = append(body, lines[i])
			}
			cmds = append(cmds, tourCommand{text: strings.Join(body, "\n") + "\n", fence: info})
		case strings.HasPrefix(line, "    ") && (i == 0 || strings.TrimSpace(lines[i-1]) == ""):
			var cmd string
			for ; i < len(lines) && strings.HasPrefix(lines[i], "    "); i++ {
				l := strings.TrimPrefix(lines[i], "    ")
				if cmd != "" {
					cmd += "\n"
				}
				cmd += l
				trimmed := strings.TrimSpace(stripComment(l))
				if strings.Count(cmd, "'")%2 == 1 || strings.HasSuffix(trimmed, "|") || strings.HasSuffix(trimmed, `\`) {
					continue
				}
				cmds = append(cmds, tourCommand{text: cmd})
				cmd = ""
			}
			if cmd != "" {
				cmds = append(cmds, tourCommand{text: cmd})
			}
			i--
		}
	}
	return cmds
}

// stripComment drops a shell comment that ends a line outside quotes.
func stripComment(line string) string {
	quoted := false
	for i, r := range line {
		switch {
		case r == '\'':
			quoted = !quoted
		case r == '#' && !quoted && (i == 0 || line[i-1] == ' '):
			return line[:i]
		}
	}
	return line
}

// tour is the scratch directory a tour runs in, and what runs there.
type tour struct {
	t        *testing.T
	dir      string
	addr     string // where courier listens, for the tour's 127.0.0.1:8425
	recvPort string // where the receiver listens, for the tour's port 9000
	env      []string
	client   *api.Client
	server   *process

	receiverCmd string // as the tour gives it, to start it again
	receiver    *exec.Cmd
	recvMu      sync.Mutex
	recvLines   []string // what the receiver printed, over all its runs
	recvDone    chan struct{}
}

// localize points the tour's addresses at the ones this test uses, so that
// it runs beside anything else on the machine.
func (tr *tour) localize(cmd string) string {
	cmd = strings.ReplaceAll(cmd, "127.0.0.1:8425", tr.addr)
	cmd = strings.ReplaceAll(cmd, "127.0.0.1:9000", "127.0.0.1:"+tr.recvPort)
	return strings.ReplaceAll(cmd, `("127.0.0.1", 9000)`, `("127.0.0.1", `+tr.recvPort+`)`)
}

// run runs a shell command of the tour in its directory and returns what
// it printed and whether it succeeded.
func (tr *tour) run(cmd string) (string, error) {
	tr.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, "sh", "-c", tr.localize(cmd))
	c.Dir, c.Env = tr.dir, tr.env
	out, err := c.CombinedOutput()
	tr.t.Logf("$ %s\n%s", cmd, out)
	return string(out), err
}

// mustRun runs a command that must succeed, and returns what it printed.
func (tr *tour) mustRun(cmd string) string {
	tr.t.Helper()
	out, err := tr.run(cmd)
	if err != nil {
		tr.t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	return out
}

// want fails unless out matches every pattern.
func (tr *tour) want(cmd, out string, patterns ...string) {
	tr.t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile(p).MatchString(out) {
			tr.t.Fatalf("%s printed no match for %s:\n%s", cmd, p, out)
		}
	}
}

// startReceiver runs the tour's receiver and collects what it prints.
func (tr *tour) startReceiver() {
	tr.t.Helper()
	c := exec.Command("sh", "-c", "exec "+tr.localize(tr.receiverCmd))
	c.Dir, c.Env = tr.dir, tr.env
	pr, pw := io.Pipe()
	c.Stdout, c.Stderr = pw, pw
	if err := c.Start(); err != nil {
		tr.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			tr.recvMu.Lock()
			tr.recvLines = append(tr.recvLines, sc.Text())
			tr.recvMu.Unlock()
		}
		close(done)
	}()
	go func() { c.Wait(); pw.Close() }()
	tr.receiver, tr.recvDone = c, done
	tr.t.Cleanup(func() { c.Process.Kill() })
	// A user starts the receiver and then goes on; the test waits until it
	// listens, as the user's typing does.
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.Dial("tcp", "127.0.0.1:"+tr.recvPort)
		if err == nil {
			conn.Close()
			return
		}
		if time.Now().After(deadline) {
			tr.t.Fatalf("the receiver does not listen: %v\n%s", err, strings.Join(tr.received(""), "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stopReceiver ends the receiver, as Ctrl-C in its terminal would.
func (tr *tour) stopReceiver() {
	tr.t.Helper()
	tr.receiver.Process.Kill()
	<-tr.recvDone
}

// received returns the lines the receiver printed that start with prefix.
func (tr *tour) received(prefix string) []string {
	tr.recvMu.Lock()
	defer tr.recvMu.Unlock()
	var got []string
	for _, l := range tr.recvLines {
		if strings.HasPrefix(l, prefix) {
			got = append(got, l)
		}
	}
	return got
}

// waitReceived waits until the receiver printed a line that starts with
// prefix, and returns it.
func (tr *tour) waitReceived(prefix string, within time.Duration) string {
	tr.t.Helper()
	waitUntil(tr.t, tr.server, within, "the receiver to print "+prefix, func() bool { return len(tr.received(prefix)) > 0 })
	return tr.received(prefix)[0]
}

// startServer runs the tour's `courier serve` and waits until it listens.
func (tr *tour) startServer(cmd string) {
	tr.t.Helper()
	p := &process{output: &bytes.Buffer{}, exited: make(chan error, 1)}
	p.cmd = exec.Command("sh", "-c", "exec "+tr.localize(cmd))
	p.cmd.Dir, p.cmd.Env = tr.dir, append(tr.env, "COURIER_LISTEN="+tr.addr)
	pr, pw := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	if err := p.cmd.Start(); err != nil {
		tr.t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait(); pw.Close() }()
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			p.mu.Lock()
			p.output.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
	}()
	tr.t.Cleanup(func() { p.cmd.Process.Kill() })
	tr.server = p
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(p.log(), "listening on http://"+tr.addr) {
		select {
		case err := <-p.exited:
			tr.t.Fatalf("%s exited at start: %v\n%s", cmd, err, p.log())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			tr.t.Fatalf("%s did not start\n%s", cmd, p.log())
		}
	}
}

// endpoint reads the tour's endpoint through the API.
func (tr *tour) endpoint() *api.Endpoint {
	tr.t.Helper()
	e, err := tr.client.Endpoint(context.Background(), "my-app")
	if err != nil {
		tr.t.Fatal(err)
	}
	return e
}

// attempts reads a message's attempts through the API.
func (tr *tour) attempts(id string) []api.Attempt {
	tr.t.Helper()
	as, err := tr.client.Attempts(context.Background(), id)
	if err != nil {
		tr.t.Fatal(err)
	}
	return as
}

// tourStep is a command the tour must have at its place, and what the
// test does with it: run it as the tour says and check what the tour says
// happens.
type tourStep struct {
	command string // a regular expression the whole command matches
	fence   string
	do      func(tr *tour, cmd string)
}

// quoted returns the text of the first `...` after lead in the tour's prose,
// for checking what the tour says a command prints.
func quoted(t *testing.T, section, lead string) string {
	t.Helper()
	m := regexp.MustCompile(regexp.QuoteMeta(lead) + "\\s*`([^`]+)`").FindStringSubmatch(section)
	if m == nil {
		t.Fatalf("the tour no longer says %q followed by a `quoted` text", lead)
	}
	return m[1]
}

func TestTourAsWritten(t *testing.T) {
	skipIfShort(t)
	if _, err := exec.LookPath("python3"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("the tour's receiver needs python3 (apt-get install python3)")
		}
		t.Skip("the tour's receiver needs python3")
	}
	section := tourSection(t)
	firstPrint := quoted(t, section, "The receiver prints")
	at := strings.Index(section, "--route my-ap\n")
	if at < 0 {
		t.Fatal("the tour no longer sends to the route my-ap, which does not exist")
	}
	refusal := quoted(t, section[at:], "prints")

	tr := &tour{t: t, dir: t.TempDir(), addr: freeAddr(t)}
	_, tr.recvPort, _ = strings.Cut(freeAddr(t), ":")
	tr.client = api.NewClient(tr.addr, "")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "COURIER_") { // a new user's shell has none of courier's
			tr.env = append(tr.env, kv)
		}
	}
	tr.env = append(tr.env, "COURIER_SERVER="+tr.addr)
	// The suspension that a refused connection starts: 30 s, the default
	// the tour names.
	const suspension = 30 * time.Second

	steps := []tourStep{
		{command: `go build -o courier \./cmd/courier`, do: func(tr *tour, cmd string) {
			// The tests' binary is this build already.
			if err := os.Symlink(courierBin, filepath.Join(tr.dir, "courier")); err != nil {
				t.Fatal(err)
			}
		}},
		{command: `(?s)python3 -c '.*serve_forever\(\)'`, do: func(tr *tour, cmd string) {
			if !strings.Contains(cmd, `("127.0.0.1", 9000)`) {
				t.Fatalf("the receiver no longer listens on 127.0.0.1:9000 as the configuration says:\n%s", cmd)
			}
			tr.receiverCmd = cmd
			tr.startReceiver()
		}},
		{command: `(?s)# courier\.yaml\n.*`, fence: "yaml", do: func(tr *tour, cmd string) {
			if err := os.WriteFile(filepath.Join(tr.dir, "courier.yaml"), []byte(tr.localize(cmd)), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{command: `\./courier config check courier\.yaml`, do: func(tr *tour, cmd string) {
			tr.want(cmd, tr.mustRun(cmd), `courier\.yaml is valid`)
		}},
		{command: `\./courier serve --config courier\.yaml`, do: func(tr *tour, cmd string) {
			tr.startServer(cmd)
		}},
		{command: `(?s)echo '\{"invoice": "2026-000123", "total": 42\}' \|\n\s+\./courier send --type invoice --route my-app --id inv-2026-000123`, do: func(tr *tour, cmd string) {
			tr.want(cmd, tr.mustRun(cmd), `created inv-2026-000123`)
			// "The receiver prints ... at once": the first attempt.
			if got := tr.waitReceived("inv-2026-000123 ", time.Minute); got != firstPrint {
				t.Fatalf("the receiver printed %q, the tour says %q", got, firstPrint)
			}
		}},
		{command: `(?s)curl -X PUT http://127\.0\.0\.1:8425/v1/messages/inv-2026-000124 .*"route": "my-app".*`, do: func(tr *tour, cmd string) {
			tr.want(cmd, tr.mustRun(cmd), `"id":"inv-2026-000124"`)
			tr.waitReceived("inv-2026-000124 1 ", 30*time.Second)
		}},
		{command: `\./courier messages list`, do: func(tr *tour, cmd string) {
			waitForState(t, tr.server, tr.client, "inv-2026-000124", courier.StateDelivered, time.Now().Add(30*time.Second))
			tr.want(cmd, tr.mustRun(cmd), `inv-2026-000124\s+invoice\s+my-app\s+delivered`, `inv-2026-000123\s+invoice\s+my-app\s+delivered`)
		}},
		{command: `\./courier messages show inv-2026-000123`, do: func(tr *tour, cmd string) {
			tr.want(cmd, tr.mustRun(cmd), `State:\s+delivered`, `(?m)^1\s.*\smy-app\s+delivered\s+-\s+204\s`)
		}},
		{command: `curl http://127\.0\.0\.1:8425/v1/messages/inv-2026-000123/attempts`, do: func(tr *tour, cmd string) {
			tr.want(cmd, tr.mustRun(cmd), `"n":1,`, `"outcome":"delivered","status":204`)
		}},
		{command: `(?s)echo '\{"invoice": "2026-000125", "total": 9\}' \|\n\s+\./courier send --type invoice --route my-app --id inv-2026-000125`, do: func(tr *tour, cmd string) {
			tr.stopReceiver() // "Stop the receiver (Ctrl-C) and send another"
			tr.want(cmd, tr.mustRun(cmd), `created inv-2026-000125`)
			// "Its first attempt fails with class connect_refused ...
			// courier suspends the endpoint at once, for 30 s".
			waitUntil(t, tr.server, 30*time.Second, "the first attempt of inv-2026-000125", func() bool { return len(tr.attempts("inv-2026-000125")) > 0 })
			a := tr.attempts("inv-2026-000125")[0]
			if a.Class != courier.ClassConnectRefused {
				t.Fatalf("first attempt %+v, the tour says connect_refused", a)
			}
			waitUntil(t, tr.server, 30*time.Second, "my-app to be suspended", func() bool { return tr.endpoint().State == courier.HealthSuspended })
			e := tr.endpoint()
			if d := e.SuspendedUntil.Sub(a.StartedAt); d < suspension || d > 2*suspension {
				t.Fatalf("suspended until %v, %v after the attempt: the tour says 30 s", e.SuspendedUntil, d)
			}
			m, err := tr.client.Message(context.Background(), "inv-2026-000125")
			if err != nil || m.State != courier.StateQueued || m.Held == nil || m.Held.Endpoint != "my-app" {
				t.Fatalf("inv-2026-000125 %+v, %v: the tour says it stays queued, held by my-app", m, err)
			}
		}},
		{command: `\./courier endpoints list\s+#.*`, do: func(tr *tour, cmd string) {
			tr.want(cmd, tr.mustRun(cmd), `(?m)^my-app\s+http\s+suspended\s`)
		}},
		{command: `\./courier messages show inv-2026-000125\s+#.*`, do: func(tr *tour, cmd string) {
			tr.want(cmd, tr.mustRun(cmd), `(?m)^1\s.*\smy-app\s+failed\s+connect_refused\s`)
		}},
		{command: `echo 'not an invoice' \| \./courier send --type invoice --route my-app --id inv-2026-000126`, do: func(tr *tour, cmd string) {
			// Before it: "Start the receiver again: the next probe ...
			// delivers the message ... and the endpoint is active again."
			tr.startReceiver()
			got := tr.waitReceived("inv-2026-000125 ", 5*time.Minute)
			if got == "inv-2026-000125 1 "+`{"invoice":"2026-000125","total":9}` {
				t.Fatalf("the receiver printed %q: attempt 1 cannot have arrived", got)
			}
			waitForState(t, tr.server, tr.client, "inv-2026-000125", courier.StateDelivered, time.Now().Add(30*time.Second))
			if s := tr.endpoint().State; s != courier.HealthActive {
				t.Fatalf("my-app is %s after the probe delivered, the tour says active", s)
			}
			// "the attempts come 30 s and then 1 min apart, not 10 s"
			as := tr.attempts("inv-2026-000125")
			for i := 1; i < len(as); i++ {
				if gap := as[i].StartedAt.Sub(as[i-1].StartedAt); gap < suspension {
					t.Fatalf("attempt %d came %v after attempt %d: the tour says the suspension (30 s or more) sets the pace: %+v", as[i].N, gap, as[i-1].N, as)
				}
			}

			tr.want(cmd, tr.mustRun(cmd), `created inv-2026-000126`)
			m := waitForState(t, tr.server, tr.client, "inv-2026-000126", courier.StateSuspended, time.Now().Add(30*time.Second))
			if m.Reason != courier.ReasonRejected || m.LastError != "HTTP 400 Bad Request" {
				t.Fatalf("inv-2026-000126 %+v: the tour says rejected with HTTP 400 Bad Request", m)
			}
			if s := tr.endpoint().State; s != courier.HealthActive {
				t.Fatalf("my-app is %s after a 400, the tour says it stays active", s)
			}
		}},
		{command: `\./courier suspended list`, do: func(tr *tour, cmd string) {
			tr.want(cmd, tr.mustRun(cmd), `inv-2026-000126\s+invoice\s+my-app\s+suspended\s+rejected\s.*HTTP 400 Bad Request`)
		}},
		{command: `\./courier suspended resubmit --route my-app\s+#.*`, do: func(tr *tour, cmd string) {
			tr.want(cmd, tr.mustRun(cmd), `resubmitted 1 message`)
			// "This receiver refuses it again, so the resubmitted message
			// is back in the suspended queue a moment later".
			waitUntil(t, tr.server, 30*time.Second, "inv-2026-000126 suspended again", func() bool {
				m, err := tr.client.Message(context.Background(), "inv-2026-000126")
				return err == nil && m.ResubmitCount == 1 && m.State == courier.StateSuspended
			})
			if n := len(tr.received("inv-2026-000126 ")); n != 2 {
				t.Fatalf("the receiver got inv-2026-000126 %d times, want 2", n)
			}
		}},
		{command: `\./courier messages discard inv-2026-000126\s+#.*`, do: func(tr *tour, cmd string) {
			tr.want(cmd, tr.mustRun(cmd), `discarded inv-2026-000126`)
			m, err := tr.client.Message(context.Background(), "inv-2026-000126")
			if err != nil || m.State != courier.StateDiscarded {
				t.Fatalf("inv-2026-000126 %+v, %v: the tour says the discard ends it", m, err)
			}
		}},
		{command: `\./courier audit`, do: func(tr *tour, cmd string) {
			tr.want(cmd, tr.mustRun(cmd), `local\s+discard\s+-\s+inv-2026-000126`, `local\s+resubmit\s+-\s+inv-2026-000126`)
		}},
		{command: `echo '\{"total": 1\}' \| \./courier send --type invoice --route my-ap`, do: func(tr *tour, cmd string) {
			out, err := tr.run(cmd)
			if err == nil || !strings.Contains(out, refusal) {
				t.Fatalf("%s: %v, printed %q; the tour says it is refused with %q", cmd, err, out, refusal)
			}
		}},
	}

	cmds := tourCommands(section)
	for i, step := range steps {
		if i >= len(cmds) {
			t.Fatalf("the tour ends before the command %s, which the test expects", step.command)
		}
		c := cmds[i]
		if c.fence != step.fence || !regexp.MustCompile(`^(?:`+step.command+`)$`).MatchString(c.text) {
			t.Fatalf("the tour's command %d is\n%s\nwhere the test expects one that matches\n%s\n(change README.md and this test together)", i+1, c.text, step.command)
		}
		step.do(tr, c.text)
	}
	if len(cmds) > len(steps) {
		t.Fatalf("the tour has commands the test does not run: %q", cmds[len(steps):])
	}
}

// TestReadmeStartsWithTheTwoCommands checks that the first two commands of
// the README are the ones a new user, and CI, take from it: how to run
// courier and how to run its tests.
func TestReadmeStartsWithTheTwoCommands(t *testing.T) {
	data, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "    ") && len(got) < 2 {
			got = append(got, strings.TrimSpace(line))
		}
	}
	want := []string{"go run ./cmd/courier serve", "go test -race ./..."}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("README.md's first two commands are %q, want %q", got, want)
	}
}
