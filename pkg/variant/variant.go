// Package variant names the code paths of an incident: the fix, which is the
// only one a deployment runs, and the variants kept for the lab. A service
// declares its variants as Mode fields of its configuration
// (internal/config/modes.go); the platform refuses to start with any of them
// other than Fixed unless ONCEMALL_ENV=lab.
package variant

// Mode selects the code path of one incident.
type Mode string

// The modes every incident has; a service may name more (an optimistic
// lock, a single orderly worker), all of them lab variants.
const (
	// Fixed is the fix, and the default of every Mode setting.
	Fixed Mode = "fixed"
	// Broken reproduces the incident.
	Broken Mode = "broken"
)
