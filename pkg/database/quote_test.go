package database

import "testing"

// TestQuoteIdentDoublesBackticks: EnsureDatabase and DropDatabase refuse a
// name with a backtick before quoting it, so no test through them can reach
// the doubling; it is checked here, where a name that got past the check
// would meet it.
func TestQuoteIdentDoublesBackticks(t *testing.T) {
	for in, want := range map[string]string{
		"oncemall_order":         "`oncemall_order`",
		"a`b":                    "`a``b`",
		"x` ; DROP DATABASE y;`": "`x`` ; DROP DATABASE y;```",
	} {
		if got := quoteIdent(in); got != want {
			t.Errorf("quoteIdent(%q) = %s, want %s", in, got, want)
		}
	}
}
