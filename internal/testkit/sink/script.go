package sink

import (
	"fmt"
	"time"
)

// stepKind says what a step does with a request.
type stepKind int

const (
	kindRespond   stepKind = iota // answer with a status, headers and body
	kindReset                     // hijack and close with a TCP RST
	kindBlackHole                 // hijack and never answer
	kindStall                     // answer the status line, then never send the body
	kindRandom                    // answer status with probability p, else the default
	kindRepeat                    // marker: play the step before it forever
	kindCycle                     // marker: start the script over
)

// Step is one scripted answer of the sink to one request. Build steps with
// Respond, Delay, Reset, BlackHole, Stall and Fail; end a script with Repeat
// or Cycle to make it run forever.
type Step struct {
	kind   stepKind
	status int
	body   string
	header [][2]string
	delay  time.Duration
	p      float64
}

// Respond answers with status and no body, at once.
func Respond(status int) Step { return Step{kind: kindRespond, status: status} }

// Delay waits d and then answers with status: a slow receiver.
func Delay(d time.Duration, status int) Step { return Respond(status).After(d) }

// Reset closes the connection with a TCP RST instead of answering: a
// receiver that crashes or a middlebox that kills the connection.
func Reset() Step { return Step{kind: kindReset} }

// BlackHole takes the request and never answers; the connection stays open
// until the client gives up or the sink closes.
func BlackHole() Step { return Step{kind: kindBlackHole} }

// Stall sends the status line and headers of status, promising a body it
// never sends: a receiver that hangs in the middle of its response.
func Stall(status int) Step { return Step{kind: kindStall, status: status} }

// Fail answers status with probability p and otherwise the sink's default
// 204, drawing from the sink's seeded generator so runs can be repeated.
func Fail(p float64, status int) Step { return Step{kind: kindRandom, status: status, p: p} }

// Repeat, as the last step of a script, plays the step before it forever.
var Repeat = Step{kind: kindRepeat}

// Cycle, as the last step of a script, starts the script over forever.
var Cycle = Step{kind: kindCycle}

// WithBody returns s answering with body as well.
func (s Step) WithBody(body string) Step {
	s.body = body
	return s
}

// WithHeader returns s answering with the header k: v as well (Retry-After,
// Location, Content-Type).
func (s Step) WithHeader(k, v string) Step {
	h := make([][2]string, len(s.header), len(s.header)+1)
	copy(h, s.header)
	s.header = append(h, [2]string{k, v})
	return s
}

// After returns s waiting d before it acts.
func (s Step) After(d time.Duration) Step {
	s.delay = d
	return s
}

// String describes the step for test failure messages.
func (s Step) String() string {
	var what string
	switch s.kind {
	case kindRespond:
		what = fmt.Sprintf("respond %d", s.status)
	case kindReset:
		what = "reset"
	case kindBlackHole:
		what = "black hole"
	case kindStall:
		what = fmt.Sprintf("stall after %d", s.status)
	case kindRandom:
		what = fmt.Sprintf("fail %g with %d", s.p, s.status)
	case kindRepeat:
		return "repeat"
	case kindCycle:
		return "cycle"
	}
	if s.delay > 0 {
		what += " after " + s.delay.String()
	}
	return what
}

// afterEnd says what a script does once its steps are played.
type afterEnd int

const (
	endDefault afterEnd = iota // answer as an unscripted path
	endRepeat                  // replay the last step
	endCycle                   // start over
)

// script is the parsed form of the steps given to Script.
type script struct {
	steps []Step
	end   afterEnd
	next  int
}

// newScript checks the placement of the Repeat and Cycle markers. A
// misplaced marker is a mistake in a test, so it panics rather than guess.
func newScript(steps []Step) *script {
	sc := &script{}
	for i, st := range steps {
		switch st.kind {
		case kindRepeat, kindCycle:
			if i != len(steps)-1 || i == 0 {
				panic(fmt.Sprintf("sink: %s must be the last step of a script and follow another step", st))
			}
			sc.end = endRepeat
			if st.kind == kindCycle {
				sc.end = endCycle
			}
		default:
			sc.steps = append(sc.steps, st)
		}
	}
	return sc
}

// take returns the step for the next request, or false when the script has
// run out and the path answers as an unscripted one.
func (sc *script) take() (Step, bool) {
	if sc.next < len(sc.steps) {
		st := sc.steps[sc.next]
		sc.next++
		return st, true
	}
	switch {
	case len(sc.steps) == 0:
		return Step{}, false
	case sc.end == endRepeat:
		return sc.steps[len(sc.steps)-1], true
	case sc.end == endCycle:
		sc.next = 1
		return sc.steps[0], true
	}
	return Step{}, false
}
