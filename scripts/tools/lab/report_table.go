package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/oncemall/oncemall/scripts/tests/lab"
)

// tableWidth is the width the default table keeps to: every line at most
// this many characters (--wide prints the one-line-per-row table instead).
const tableWidth = 120

// writeNarrowTable prints rows grouped by incident, one short line per
// variant (count, invariant, verdict), with what was injected and counted
// wrapped below it, so that no line is wider than tableWidth.
func writeNarrowTable(w io.Writer, rows []lab.Row) error {
	nameWidth := len("VARIANT")
	for _, r := range rows {
		nameWidth = max(nameWidth, utf8.RuneCountInString(r.Variant))
	}
	nameWidth = min(nameWidth, 40)
	invWidth := len("INVARIANT")
	for _, r := range rows {
		invWidth = max(invWidth, utf8.RuneCountInString(invariantText(r)))
	}
	invWidth = min(invWidth, 44)
	var b strings.Builder
	line := func(variant, count, invariant, verdict string) {
		fmt.Fprintf(&b, "  %-*s  %5s  %-*s  %s\n", nameWidth, cut(variant, nameWidth), count, invWidth, cut(invariant, invWidth), verdict)
	}
	line("VARIANT", "COUNT", "INVARIANT", "VERDICT")
	incident := -1
	for _, r := range rows {
		if r.Incident != incident {
			incident = r.Incident
			b.WriteString(cut(fmt.Sprintf("incident %d: %s", r.Incident, r.Title), tableWidth) + "\n")
		}
		count, invariant := fmt.Sprint(r.Count), invariantText(r)
		if r.Error != "" {
			count, invariant = "-", "error ("+wantText(r)+")"
		}
		line(r.Variant, count, invariant, r.Verdict)
		wrap(&b, "injected:", r.Injected)
		wrap(&b, "counted:", r.Effect)
		wrap(&b, "expected:", r.Expected)
		if r.Error != "" {
			wrap(&b, "error:", r.Error)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// invariantText says whether the invariant held and what the variant had
// to show: "violated (must break, count 2)".
func invariantText(r lab.Row) string {
	holds := "violated"
	if r.Holds {
		holds = "holds"
	}
	return holds + " (" + wantText(r) + ")"
}

func wantText(r lab.Row) string {
	want := "must hold"
	if !r.WantHolds {
		want = "must break"
	}
	if r.WantCount != 0 {
		want += fmt.Sprintf(", count %d", r.WantCount)
	}
	return want
}

// wrap writes label and text under a row, the text broken at spaces into
// lines of at most tableWidth characters, each indented past the label (a
// word longer than a line is cut).
func wrap(b *strings.Builder, label, text string) {
	const indent = 6 + 10 // under the variant, then the label's column
	prefix := fmt.Sprintf("%6s%-10s", "", label)
	room := tableWidth - indent
	text = strings.Join(strings.Fields(text), " ")
	for {
		runes := []rune(text)
		if len(runes) <= room {
			b.WriteString(prefix + text + "\n")
			return
		}
		at := strings.LastIndex(string(runes[:room+1]), " ")
		if at <= 0 {
			at = len(string(runes[:room]))
		}
		b.WriteString(prefix + strings.TrimRight(text[:at], " ") + "\n")
		text = strings.TrimLeft(text[at:], " ")
		prefix = strings.Repeat(" ", indent)
	}
}

// cut shortens s to n characters, ending it with "…" when it was longer.
func cut(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
