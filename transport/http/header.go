package http

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/sendopts"
)

// headerField is one line of a request header. key is the message's own
// spelling of the name, which orders the lines of one name ("x-a" and
// "X-A" both go as X-A); the transport's own names are never repeated.
type headerField struct{ name, key, value string }

// header builds the request header of docs/design.md §8 for body, the request's
// body as requestBody made it (a blob is read through once here to sign
// it), and steps, the responses of d.Step. The message's own headers go
// first and cannot replace what the transport
// owns: Content-Type, the webhook-* and Courier-* headers and the framing
// headers, because a receiver deduplicates and verifies on them. They may
// set User-Agent. A header that HTTP cannot carry rejects the message for
// good. The lines come sorted by name, as net/http writes them, so that the
// same message gets the same head.
func (t *Transport) header(d courier.Delivery, body bodySource, steps stepResponses, now time.Time) ([]headerField, *courier.Result) {
	m := d.Message
	h := make([]headerField, 0, len(m.Headers)+8)
	var dropped []string
	bad, invalid := "", false // the first header HTTP cannot carry, by name
	ua := -1                  // the message's first User-Agent, in the order the lines go
	for k, v := range m.Headers {
		if !courier.ValidHeaderName(k) || !courier.ValidHeaderValue(v) {
			if !invalid || k < bad {
				bad, invalid = k, true
			}
			continue
		}
		if reservedHeader(k) {
			dropped = append(dropped, k)
			continue
		}
		name := http.CanonicalHeaderKey(k)
		if name == "User-Agent" && (ua < 0 || k < h[ua].key) {
			ua = len(h)
		}
		h = append(h, headerField{name: name, key: k, value: v})
	}
	if invalid {
		return nil, &courier.Result{Class: courier.ClassRejected,
			Error: fmt.Sprintf("message header %q cannot be sent over HTTP", clip(bad, 64))}
	}
	if len(dropped) > 0 {
		slices.Sort(dropped)
		t.log.Debug("http transport: message headers left out", "message", m.ID, "headers", dropped)
	}

	ct := m.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	if !courier.ValidHeaderValue(ct) {
		return nil, &courier.Result{Class: courier.ClassRejected, Error: "the content type cannot be sent over HTTP"}
	}
	if d.Step != nil && d.Step.Envelope {
		ct = "application/json" // the message's type is inside the envelope
	}
	h = append(h, headerField{name: "Content-Type", value: ct})
	if ua < 0 || h[ua].value == "" {
		h = slices.DeleteFunc(h, func(f headerField) bool { return f.name == "User-Agent" })
		h = append(h, headerField{name: "User-Agent", value: t.opts.UserAgent})
	}
	// A workflow's step has an id of its own, so that a receiver serving
	// two steps (or a step and its compensation) deduplicates them apart.
	id := d.DeliveryID()
	ts := strconv.FormatInt(now.Unix(), 10)
	// Written in lower case as the Standard Webhooks spec and §8 spell them.
	h = append(h, headerField{name: "webhook-id", value: id}, headerField{name: "webhook-timestamp", value: ts})
	if s := settingsOf(d.Endpoint); len(s.Secrets) > 0 || s.Signature == SignatureV1a {
		var sig string
		var err error
		timeout := sendopts.Timeout(d.Endpoint, t.opts.DefaultTimeout)
		switch {
		case s.Signature == SignatureV1a && body.blob != nil:
			sig, err = signBlobV1a(t.signingKeys(), id, ts, body.blob, timeout)
		case s.Signature == SignatureV1a:
			sig, err = signV1a(t.signingKeys(), id, ts, body.inline)
		case body.blob != nil:
			sig, err = signBlob(s.Secrets, id, ts, body.blob, timeout)
		default:
			sig, err = sign(s.Secrets, id, ts, body.inline)
		}
		if err != nil {
			if perr, ok := asPayloadError(err); ok {
				res := payloadResult(perr)
				return nil, &res
			}
			return nil, &courier.Result{Class: courier.ClassTransport, Error: fmt.Sprintf("endpoint %s: %v", d.Endpoint.Name, err)}
		}
		h = append(h, headerField{name: "webhook-signature", value: sig})
	}
	h = append(h, headerField{name: "Courier-Attempt", value: strconv.Itoa(d.Attempt)},
		headerField{name: "Courier-Type", value: m.Type})
	if m.Subscription != "" {
		h = append(h, headerField{name: "Courier-Subscription", value: m.Subscription})
	}
	if m.Sequence != 0 {
		// The message's place in its key's order, so that the receiver can
		// check the order itself (docs/design.md §8).
		h = append(h, headerField{name: "Courier-Sequence", value: strconv.FormatInt(m.Sequence, 10)})
		if m.PreviousID != "" {
			h = append(h, headerField{name: "Courier-Previous-Id", value: m.PreviousID})
		}
	}
	if d.Step != nil {
		var left []int
		if h, left = stepHeader(h, d.Step, steps); len(left) > 0 {
			t.log.Debug("http transport: step responses left out of the headers", "message", m.ID,
				"step", d.Step.Step, "steps", left)
		}
	}
	slices.SortFunc(h, func(a, b headerField) int {
		return cmp.Or(strings.Compare(a.name, b.name), strings.Compare(a.key, b.key))
	})
	return h, nil
}

// reservedHeader reports whether the transport owns the header name k.
func reservedHeader(k string) bool {
	k = strings.ToLower(k)
	if strings.HasPrefix(k, "webhook-") || strings.HasPrefix(k, "courier-") {
		return true
	}
	switch k {
	case "content-type", "content-length", "host", "transfer-encoding", "connection",
		"keep-alive", "te", "trailer", "upgrade", "proxy-connection", "expect":
		return true
	}
	return false
}

// sign returns the webhook-signature value: one "v1,<base64 HMAC-SHA256>"
// per secret, space-separated, so a receiver holding any one of the secrets
// of a rotation can verify.
func sign(secrets []string, id, ts string, body []byte) (string, error) {
	var b strings.Builder
	for i, s := range secrets {
		mac, err := newMAC(s, id, ts)
		if err != nil {
			return "", fmt.Errorf("secret %d: %w", i+1, err)
		}
		mac.Write(body)
		writeSignature(&b, mac)
	}
	return b.String(), nil
}

// signingKey returns the HMAC key of a secret: the decoded bytes of a
// Standard Webhooks "whsec_<base64>" secret, else the secret's own bytes.
func signingKey(secret string) ([]byte, error) {
	enc, ok := strings.CutPrefix(secret, "whsec_")
	if !ok {
		return []byte(secret), nil
	}
	if key, err := base64.StdEncoding.DecodeString(enc); err == nil {
		return key, nil
	}
	if key, err := base64.RawStdEncoding.DecodeString(enc); err == nil {
		return key, nil
	}
	return nil, fmt.Errorf("a whsec_ secret must be base64 after the prefix")
}

// clip shortens s to at most n bytes for an error message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// withTraceParent puts the attempt's trace context in h as traceparent
// (W3C Trace Context), in place of any the message carried, keeping h
// sorted.
func withTraceParent(h []headerField, tp string) []headerField {
	h = slices.DeleteFunc(h, func(f headerField) bool { return strings.EqualFold(f.name, "traceparent") })
	h = append(h, headerField{name: "traceparent", value: tp})
	slices.SortFunc(h, func(a, b headerField) int {
		return cmp.Or(strings.Compare(a.name, b.name), strings.Compare(a.key, b.key))
	})
	return h
}
