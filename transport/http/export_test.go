package http

// SetMaxEnvelopePayload lowers the largest payload a step's envelope
// carries, until the returned function puts it back. Tests that call it
// must not run in parallel.
func SetMaxEnvelopePayload(n int64) (restore func()) {
	old := maxEnvelopePayload
	maxEnvelopePayload = n
	return func() { maxEnvelopePayload = old }
}
