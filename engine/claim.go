package engine

import (
	"context"
	"fmt"
	"time"

	courier "github.com/courier-gw/courier"
)

// claimed returns the message to hand ep's sender for m: m itself, or, when
// ep's claim check takes m's payload, a notice in its place with a URL
// signed for this endpoint, from which the receiver fetches the payload
// until the check's TTL has passed. The notice goes as any message does
// (the HTTP transport signs it, URL and all), so the attempt is delivered
// when the receiver takes it. A notice that cannot be made is the
// attempt's failure, as a transport's would be.
func (e *Engine) claimed(ctx context.Context, m *courier.Message, ep *courier.Endpoint) (*courier.Message, *courier.Result) {
	if !ep.ClaimCheck.Applies(m) {
		return m, nil
	}
	if e.opts.PublicURL == "" {
		return nil, &courier.Result{Class: courier.ClassTransport,
			Error: fmt.Sprintf("endpoint %s has a claim check, and courier has no public_url to build the notice's URL on", ep.Name)}
	}
	secret, err := e.store.Secret(ctx, courier.ClaimSecretName)
	if err != nil {
		return nil, &courier.Result{Class: courier.ClassTransport,
			Error: fmt.Sprintf("read the key that signs claim-check URLs: %v", err)}
	}
	expires := e.clock.Now().Add(ep.ClaimCheck.TTL).Truncate(time.Second)
	c := courier.ClaimTicket{Key: m.Key(), Endpoint: ep.Name, Digest: m.PayloadSHA256(), Expires: expires}
	return courier.ClaimNoticeFor(m, courier.ClaimURL(e.opts.PublicURL, secret, c), expires), nil
}
