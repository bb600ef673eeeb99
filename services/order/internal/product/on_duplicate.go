package product

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
