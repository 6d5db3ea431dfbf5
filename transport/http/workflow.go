package http

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/courier-gw/courier"
)

// maxStepResponseHeader bounds a Courier-Step-<j>-Response value: a longer
// response travels only in the envelope, as receivers and proxies cap the
// size of a request head.
const maxStepResponseHeader = 4 << 10

// MaxEnvelopePayload is the largest payload a workflow step's envelope
// carries: the envelope is one JSON document built in memory, so a blob
// is read whole into it, and a larger one is refused for good.
const MaxEnvelopePayload = 64 << 20

// maxEnvelopePayload is MaxEnvelopePayload, lowered by tests.
var maxEnvelopePayload int64 = MaxEnvelopePayload

// requestBody returns the body of d's request: the payload, or for a
// workflow step with an envelope the JSON document that wraps it and steps,
// the step's responses. A blob is read into an envelope within timeout,
// and otherwise anew at each request, within its deadline. Neither read
// ends with ctx: a request under way runs to its outcome or its timeout.
func requestBody(ctx context.Context, d courier.Delivery, steps stepResponses, timeout time.Duration) (bodySource, *courier.Result) {
	m := d.Message
	if d.Step == nil || !d.Step.Envelope {
		if m.HasBlob() {
			return bodySource{blob: &blobSource{ctx: context.WithoutCancel(ctx), d: d, size: m.Size}}, nil
		}
		return bodySource{inline: m.Payload}, nil
	}
	payload := m.Payload
	if m.HasBlob() {
		readCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		defer cancel()
		var err error
		payload, err = m.ReadPayload(readCtx, d.Blobs, maxEnvelopePayload)
		if courier.ErrorCode(err) == courier.CodePayloadTooLarge {
			return bodySource{}, &courier.Result{Class: courier.ClassRejected,
				Error: fmt.Sprintf("the payload of %d bytes is over the %d bytes a step's envelope can carry", m.Size, maxEnvelopePayload)}
		}
		if err != nil {
			res := payloadResult(&payloadError{err: err})
			return bodySource{}, &res
		}
	}
	body, err := envelope(m, payload, d.Step, steps)
	if err != nil {
		return bodySource{}, &courier.Result{Class: courier.ClassTransport, Error: "cannot build the step's envelope: " + err.Error()}
	}
	return bodySource{inline: body}, nil
}

// stepEnvelope is the body of a step sent with an envelope. The payload is
// either JSON, inline, or anything else in base64 with its content type.
type stepEnvelope struct {
	Payload       json.RawMessage `json:"payload,omitempty"`
	PayloadBase64 *string         `json:"payload_base64,omitempty"`
	ContentType   string          `json:"content_type,omitempty"`
	Step          int             `json:"step"`
	Steps         int             `json:"steps"`
	Compensate    bool            `json:"compensate,omitempty"`
	Responses     stepResponses   `json:"responses"`
}

// envelope builds the JSON document that carries m's payload together with
// the step's place in its workflow and rs, the earlier steps' responses.
func envelope(m *courier.Message, payload []byte, s *courier.StepContext, rs stepResponses) ([]byte, error) {
	env := stepEnvelope{Step: s.Step, Steps: s.Steps, Compensate: s.Compensate, Responses: rs}
	if isJSONType(m.ContentType) && utf8.Valid(payload) && json.Valid(payload) {
		env.Payload = payload
	} else {
		b64 := base64.StdEncoding.EncodeToString(payload)
		env.PayloadBase64 = &b64
		env.ContentType = m.ContentType
		if env.ContentType == "" {
			env.ContentType = "application/octet-stream"
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// The payload arrives as the sender wrote it, "<" and "&" included.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(env); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// isJSONType reports whether the content type ct is JSON: application/json
// or a +json type such as application/cloudevents+json.
func isJSONType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// stepResponse is the response of step j, as JSON.
type stepResponse struct {
	j    int
	json []byte
}

// stepResponses are the responses a step gets, in the order of the steps.
type stepResponses []stepResponse

// responses returns the responses of s sorted by step, each as JSON.
func responses(s *courier.StepContext) stepResponses {
	out := make(stepResponses, 0, len(s.Responses))
	for j, r := range s.Responses {
		out = append(out, stepResponse{j: j, json: responseJSON(r)})
	}
	slices.SortFunc(out, func(a, b stepResponse) int { return a.j - b.j })
	return out
}

// MarshalJSON writes the responses as one object keyed by step number, in
// step order rather than the string order a map would give.
func (rs stepResponses) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, r := range rs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(strconv.Itoa(r.j)))
		b.WriteByte(':')
		b.Write(r.json)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// responseJSON returns a step's response as JSON: compacted when it is JSON
// already, so that a receiver gets structure, else as a JSON string.
func responseJSON(r string) []byte {
	if utf8.ValidString(r) && json.Valid([]byte(r)) {
		var b bytes.Buffer
		if json.Compact(&b, []byte(r)) == nil {
			return b.Bytes()
		}
	}
	b, _ := json.Marshal(r) // a string always marshals
	return b
}

// stepHeader adds the workflow headers of s to h: Courier-Step,
// Courier-Compensate and one Courier-Step-<j>-Response per response in rs.
// It returns h and the steps whose response is too large or cannot be a
// header value; those reach the receiver only in an envelope.
func stepHeader(h []headerField, s *courier.StepContext, rs stepResponses) (_ []headerField, left []int) {
	h = append(h, headerField{name: "Courier-Step", value: strconv.Itoa(s.Step) + "/" + strconv.Itoa(s.Steps)})
	if s.Compensate {
		h = append(h, headerField{name: "Courier-Compensate", value: "true"})
	}
	for _, r := range rs {
		v := string(r.json)
		if len(v) > maxStepResponseHeader || !courier.ValidHeaderValue(v) {
			left = append(left, r.j)
			continue
		}
		h = append(h, headerField{name: "Courier-Step-" + strconv.Itoa(r.j) + "-Response", value: v})
	}
	return h, left
}
