package courier

import (
	"context"
	"time"
)

// Sender delivers one message to one endpoint of its transport and says how
// it went. It classifies failures; it decides nothing about retries.
type Sender interface {
	Send(ctx context.Context, d Delivery) Result
}

// Delivery is one attempt to hand over.
type Delivery struct {
	Message  *Message
	Endpoint *Endpoint
	Attempt  int // the attempt's number, from 1, counting every attempt of the message
}

// Result is the outcome of one attempt. A zero Class means delivered.
type Result struct {
	Class      ErrorClass
	Status     int           // transport status: HTTP status, SMTP reply code; 0 if none
	Error      string        // what went wrong, for people; empty on success
	Response   string        // the start of the receiver's answer, at most MaxResponseExcerpt bytes
	RetryAfter time.Duration // the receiver's Retry-After, if it gave one
}

// Delivered reports whether the receiver took the message.
func (r Result) Delivered() bool { return r.Class == "" }
