package smtp

import (
	"bytes"
	"encoding/base64"
	"math/rand/v2"
	"testing"
)

// The attachment of a blob, encoded as it streams, is what base64Lines
// makes of the same bytes in memory, whatever the sizes of the writes.
func TestStreamedBase64IsBase64Lines(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 1, 2, 3, 56, 57, 58, 114, 1000, 57 * 100, 100_000} {
		p := make([]byte, size)
		for i := range p {
			p[i] = byte(rnd.IntN(256))
		}
		var got bytes.Buffer
		enc := base64.NewEncoder(base64.StdEncoding, &lineWriter{w: &got})
		for rest := p; len(rest) > 0; {
			n := min(len(rest), 1+rnd.IntN(5000))
			enc.Write(rest[:n])
			rest = rest[n:]
		}
		enc.Close()
		if want := base64Lines(p); !bytes.Equal(got.Bytes(), want) {
			t.Errorf("%d bytes: streamed\n%q\nwant\n%q", size, clip(got.String(), 200), clip(string(want), 200))
		}
	}
}
