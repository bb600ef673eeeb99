// Package lab runs the incident scenarios and reports them as a table or as
// JSON: the `make lab` front end. The scenarios themselves live beside each
// incident's code (services/<svc>/lab) and are the same ones the tests
// assert on.
package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/oncemall/oncemall/pkg/lab"
)

// Row is one scenario's outcome as reported.
type Row struct {
	Incident  int     `json:"incident"`
	Title     string  `json:"title"`
	Variant   string  `json:"variant"`
	Injected  string  `json:"injected"`
	Effect    string  `json:"effect"`
	Count     int     `json:"count"`
	Expected  string  `json:"expected"`
	Holds     bool    `json:"holds"`
	WantHolds bool    `json:"want_holds"`
	WantCount int     `json:"want_count,omitempty"` // the exact count required, when not zero
	Verdict   string  `json:"verdict"`              // "ok" or "FAIL"
	Error     string  `json:"error,omitempty"`
	Seconds   float64 `json:"seconds"`
}

// Run executes scenarios one after another (they race goroutines inside;
// running them side by side would only blur their timing) and returns a row
// for each. It stops early only when ctx ends.
func Run(ctx context.Context, env lab.Env, scenarios []lab.Scenario) []Row {
	rows := make([]Row, 0, len(scenarios))
	for i, s := range scenarios {
		if ctx.Err() != nil {
			break
		}
		env.Note("[%d/%d] incident %d, %s: running", i+1, len(scenarios), s.Incident, s.Variant)
		start := time.Now()
		res, err := s.Run(ctx, env)
		row := Row{
			Incident: s.Incident, Title: res.Title, Variant: s.Variant, Injected: res.Injected,
			Effect: res.Effect, Count: res.Count, Expected: res.Expected, Holds: res.Holds,
			WantHolds: s.WantHolds, WantCount: s.WantCount, Seconds: time.Since(start).Seconds(),
		}
		switch {
		case err != nil:
			row.Verdict, row.Error = "FAIL", err.Error()
		case s.Verdict(res):
			row.Verdict = "ok"
		default:
			row.Verdict = "FAIL"
		}
		env.Note("[%d/%d] incident %d, %s: %s in %.1fs", i+1, len(scenarios), s.Incident, s.Variant, row.Verdict, row.Seconds)
		rows = append(rows, row)
	}
	return rows
}

// Failed reports whether any row failed its verdict: a fixed variant with a
// duplicate effect, a broken variant that did not reproduce, or an error.
func Failed(rows []Row) bool {
	for _, r := range rows {
		if r.Verdict != "ok" {
			return true
		}
	}
	return false
}

// WriteTable prints rows as an aligned table.
func WriteTable(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "INCIDENT\tVARIANT\tINJECTED\tEFFECT COUNTED\tCOUNT\tEXPECTED\tINVARIANT\tVERDICT")
	for _, r := range rows {
		holds := "violated"
		if r.Holds {
			holds = "holds"
		}
		count := fmt.Sprint(r.Count)
		if r.Error != "" {
			holds, count = "error: "+oneLine(r.Error), "-"
		}
		want := "must hold"
		if !r.WantHolds {
			want = "must break"
		}
		if r.WantCount != 0 {
			want += fmt.Sprintf(", count %d", r.WantCount)
		}
		fmt.Fprintf(tw, "%d %s\t%s\t%s\t%s\t%s\t%s\t%s (%s)\t%s\n",
			r.Incident, r.Title, r.Variant, r.Injected, r.Effect, count, r.Expected, holds, want, r.Verdict)
	}
	return tw.Flush()
}

// WriteJSON prints rows as a JSON array.
func WriteJSON(w io.Writer, rows []Row) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rows)
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}
