package courier

import "slices"

// Role says what an API key may do. The API decides what each role allows;
// the names are part of the configuration contract (docs/design.md §9).
type Role string

// The roles of API keys.
const (
	RoleSender   Role = "sender"   // an application that hands in messages and reads its own
	RoleOperator Role = "operator" // a person who reads all, resubmits, discards and switches endpoints
	RoleAdmin    Role = "admin"    // may do everything, reload included
)

// Roles lists every role.
var Roles = []Role{RoleSender, RoleOperator, RoleAdmin}

// Valid reports whether r is one of the defined roles.
func (r Role) Valid() bool { return slices.Contains(Roles, r) }
