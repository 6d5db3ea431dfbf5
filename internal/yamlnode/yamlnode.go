// Package yamlnode reads YAML nodes the one way courier reads them, in the
// configuration file and in a spec typed on the dashboard alike: aliases
// followed to their anchor, and what counts as null.
package yamlnode

import "go.yaml.in/yaml/v3"

// maxAliases bounds the aliases followed in a row, against an alias that
// leads back to itself.
const maxAliases = 100

// Resolve follows aliases to the anchored node.
func Resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < maxAliases; i++ {
		n = n.Alias
	}
	return n
}

// IsNull reports whether n is missing or a null scalar (null, ~ or empty).
func IsNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}
