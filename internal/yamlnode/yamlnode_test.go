package yamlnode

import (
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestResolveAndIsNull(t *testing.T) {
	t.Parallel()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte("a: &x 1\nb: *x\nc: null\nd: ~\ne:\nf: text\n"), &doc); err != nil {
		t.Fatal(err)
	}
	values := map[string]*yaml.Node{}
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		values[m.Content[i].Value] = m.Content[i+1]
	}
	if got := Resolve(values["b"]); got != values["a"] {
		t.Errorf("Resolve(*x) = %v, want the anchored node", got)
	}
	if got := Resolve(values["f"]); got != values["f"] {
		t.Errorf("Resolve of a scalar = %v, want the scalar", got)
	}
	for key, want := range map[string]bool{"a": false, "c": true, "d": true, "e": true, "f": false} {
		if got := IsNull(values[key]); got != want {
			t.Errorf("IsNull(%s) = %v, want %v", key, got, want)
		}
	}
	if !IsNull(nil) {
		t.Error("IsNull(nil) = false, want true")
	}

	// An alias that leads back to itself ends after a bounded walk.
	loop := &yaml.Node{Kind: yaml.AliasNode}
	loop.Alias = loop
	if got := Resolve(loop); got != loop {
		t.Errorf("Resolve of a loop = %v, want the alias itself", got)
	}
}
