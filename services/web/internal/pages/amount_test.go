package pages

import "testing"

func TestParseAmount(t *testing.T) {
	for in, want := range map[string]int64{"12.50": 1250, "12.5": 1250, "12": 1200, "0.05": 5, " 3.00 ": 300, "0": 0} {
		if got, err := parseAmount(in); err != nil || got != want {
			t.Errorf("parseAmount(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "1.234", "-1", "1,50", "abc", ".5", "1.-5", "1e3"} {
		if got, err := parseAmount(in); err == nil {
			t.Errorf("parseAmount(%q) = %d, want an error", in, got)
		}
	}
}
