package courier

import (
	"context"
	"io"
	"strconv"
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
	// Step is set when the delivery is a step of a workflow, or the
	// compensation of one.
	Step *StepContext
	// Blobs is where a Message with a Blob keeps its payload (the store's).
	Blobs Blobs
}

// OpenPayload returns the payload to send, from its start, however large:
// a sender that streams reads it from here, once per attempt.
func (d Delivery) OpenPayload(ctx context.Context) (io.ReadCloser, error) {
	return d.Message.OpenPayload(ctx, d.Blobs)
}

// StepContext is what the delivery of a workflow's step carries besides the
// message: which step, and the responses of the steps done before.
type StepContext struct {
	Step, Steps int
	// Compensate is set for the delivery that undoes Step.
	Compensate bool
	// Responses are the responses of the steps done, by step.
	Responses map[int]string
	// Envelope sends the payload and the responses as one JSON document.
	Envelope bool
}

// DeliveryID is the id a receiver deduplicates a delivery by (webhook-id
// over HTTP), the same at every attempt of the delivery and different for
// any two deliveries: the message's Key, which is its id when it was sent
// to a route and "<id>/<subscription>" for its delivery to a subscription
// when it was published (two subscriptions that reach one endpoint make
// two deliveries, which a receiver must not take for one); for a
// workflow's step the Key then ".<step>" (a compensation
// ".<step>.compensate").
func (d Delivery) DeliveryID() string {
	if d.Step == nil {
		return d.Message.Key()
	}
	id := d.Message.Key() + "." + strconv.Itoa(d.Step.Step)
	if d.Step.Compensate {
		id += ".compensate"
	}
	return id
}

// Result is the outcome of one attempt. A zero Class means delivered.
type Result struct {
	Class    ErrorClass
	Status   int    // transport status: HTTP status, SMTP reply code; 0 if none
	Error    string // what went wrong, for people; empty on success
	Response string // the start of the receiver's answer, at most MaxResponseExcerpt bytes
	// Body is the receiver's whole answer (up to MaxStepResponse) to a step
	// of a workflow, kept for the later steps; empty otherwise.
	Body       string
	RetryAfter time.Duration // the receiver's Retry-After, if it gave one
}

// Delivered reports whether the receiver took the message.
func (r Result) Delivered() bool { return r.Class == "" }
