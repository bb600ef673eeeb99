package catalog

import "fmt"

// Mode is how products are created, selectable by configuration so the
// broken way and the fix of incident 3 can be run side by side.
type Mode string

const (
	// ModeFixed writes a product_dedup row with a unique (name, model) in the
	// same transaction as the product; the unique key decides every race.
	// Batch copies run on the full worker pool.
	ModeFixed Mode = "fixed"
	// ModeOrderly is the story's first fix: the same check-then-insert as
	// ModeBroken, made correct for batch copies by consuming with one worker
	// only. It is slow, and it protects nothing but the batch copy: a
	// POST /products racing a copy can still create a duplicate.
	ModeOrderly Mode = "orderly"
	// ModeBroken is the incident: each worker checks "is there a live
	// product with this name and model?" and inserts when there is none. Two
	// workers copying the same products at once both see "none" and both
	// insert, so duplicate live products appear. Never the default.
	ModeBroken Mode = "broken"
)

// Modes lists the valid modes.
var Modes = []string{string(ModeFixed), string(ModeOrderly), string(ModeBroken)}

// ParseMode validates a mode name.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeFixed, ModeOrderly, ModeBroken:
		return m, nil
	}
	return "", fmt.Errorf("unknown product copy mode %q (want fixed, orderly or broken)", s)
}

// Workers returns the number of concurrent copy workers the mode runs with:
// orderly consumes with one worker whatever is configured.
func (m Mode) Workers(configured int) int {
	if m == ModeOrderly {
		return 1
	}
	return configured
}

// OnDuplicate is what a batch copy does when a product already exists.
type OnDuplicate string

const (
	// SkipDuplicates skips an existing product, counts it and records the
	// existing product's id; the rest of the batch is created.
	SkipDuplicates OnDuplicate = "skip"
	// FailOnDuplicate creates nothing of a batch that meets any duplicate and
	// fails it with the list of duplicates (all or nothing).
	FailOnDuplicate OnDuplicate = "fail"
)

// ParseOnDuplicate validates an on-duplicate policy; empty means skip.
func ParseOnDuplicate(s string) (OnDuplicate, error) {
	switch d := OnDuplicate(s); d {
	case "":
		return SkipDuplicates, nil
	case SkipDuplicates, FailOnDuplicate:
		return d, nil
	}
	return "", invalid("on_duplicate must be %q or %q", SkipDuplicates, FailOnDuplicate)
}
