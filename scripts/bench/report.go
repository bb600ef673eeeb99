package main

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oncemall/oncemall/pkg/lab/dupproof"
)

// Report is everything docs/benchmarks.md shows.
type Report struct {
	Started, Finished time.Time
	Machine           Machine
	Note              string
	Outcomes          []Outcome
	Dup               []dupproof.Row
	DupErr            error
	Checks            []Check
	Invocation        string
}

// Write renders the report as Markdown.
func (r Report) Write(w io.Writer) error {
	var b bytes.Buffer
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	m := r.Machine

	p("# Benchmarks\n\n")
	p("Written by `%s` (scripts/bench) — every figure below is parsed from the\n", r.Invocation)
	p("`go test -bench` output of the run or measured by the program itself; nothing is typed by hand.\n")
	p("Re-run `make bench` to refresh this page. Each area's own page (linked per suite) discusses its\n")
	p("figures and design; this page is the one-command snapshot.\n\n")

	p("## Machine and run\n\n")
	p("| | |\n|---|---|\n")
	p("| date (UTC) | %s → %s (%s) |\n", r.Started.Format("2006-01-02 15:04"), r.Finished.Format("15:04"), r.Finished.Sub(r.Started).Round(time.Second))
	p("| CPU | %d × %s |\n", m.CPUs, m.CPUModel)
	p("| memory | %s |\n", m.Memory)
	p("| OS/arch | %s |\n", m.KernelArch)
	p("| Go | %s |\n", m.GoVersion)
	p("| MariaDB/MySQL | %s at %s |\n", m.MySQL, m.MySQLAddr)
	p("| NATS | %s at %s |\n", m.NATS, m.NATSURL)
	p("| Redis | %s at %s |\n", m.Redis, m.RedisAddr)
	p("| load average (1, 5, 15 min) | %s at the start, %s at the end |\n\n", m.LoadStart, m.LoadEnd)
	if l, ok := loadOne(m.LoadStart); ok && l > float64(m.CPUs) {
		p("**The machine was busy:** the load average was above its %d cores when the run started, so other\n", m.CPUs)
		p("work shared the CPUs with the benchmarks and the database. Absolute figures are low and noisy;\n")
		p("ratios measured within one benchmark (interleaved modes) are the more reliable reading.\n\n")
	}
	if r.Note != "" {
		p("Note on this run: %s\n\n", r.Note)
	}
	p("The databases, Redis and NATS run on the same machine as the benchmarks.\n\n")

	p("## Targets\n\n")
	p("| area | target | measured | verdict |\n|---|---|---|---|\n")
	for _, c := range r.Checks {
		verdict := c.Status
		switch c.Status {
		case Met:
			verdict = "**met**"
		case NotMet:
			verdict = "**not met**"
		}
		p("| %s | %s | %s | %s |\n", c.Area, esc(c.Target), c.Value, verdict)
	}
	p("\n")
	p("Medians over the runs of each benchmark (`-count`); a ratio is the ratio of two medians.\n")
	p("\"figure only\": a figure without a threshold, which the issue asks for or which illustrates a\n")
	p("target judged on another benchmark. The e2e targets are judged on the load generator's reports\n")
	p("(docs/benchmarks/e2e.md defines each figure); \"not judged (quick run)\" marks a run with shortened durations.\n\n")

	p("## Commands\n\n")
	p("`make bench` runs, from the repository root:\n\n```sh\n")
	for _, o := range r.Outcomes {
		p("%s\n", o.Suite.Command())
	}
	p("```\n\nthen races goroutines for one Redis key in process (`pkg/lab/dupproof`, as `make dupproof` does).\n")
	p("One suite: `go run ./scripts/bench --only %s` (this rewrites the page with that suite only).\n\n", r.firstSuite())

	p("## Figures\n")
	for _, o := range r.Outcomes {
		s := o.Suite
		p("\n### %s\n\n%s Details: [%s](%s).\n\n", s.Title, s.About, s.Doc, strings.TrimPrefix(s.Doc, "docs/"))
		switch {
		case o.Skipped != "":
			p("Not run: %s.\n", o.Skipped)
			continue
		case o.E2E != nil:
			if o.Err != nil {
				p("**Some runs failed** after %.0f s:\n\n```\n%s\n```\n\n", o.Seconds, o.Err)
			}
			writeE2E(&b, o.E2E, o.Seconds)
			continue
		case o.Err != nil:
			p("**The suite failed** after %.0f s:\n\n```\n%s\n```\n", o.Seconds, o.Err)
			if len(o.Samples) == 0 {
				continue
			}
		}
		p("`%s` — %.0f s.\n\n", s.Command(), o.Seconds)
		writeFigures(&b, Summarise(o.Samples))
		p("\n<details><summary>raw result lines</summary>\n\n```\n")
		for _, smp := range o.Samples {
			p("%s\n", smp.Line)
		}
		p("```\n</details>\n")
	}

	p("\n### Redis entry guards: check-then-set vs SET NX vs sliding window (incident 4)\n\n")
	p("Goroutines released together race for one key on the local Redis; the check-then-set leaves a\n")
	p("%v gap between its EXISTS and its SET, as a real handler's query or remote call would.\n", dupproof.Gap)
	p("The same code runs in `make dupproof`, in `make lab` (incident 4's extra rows) and in its test.\n\n")
	if r.DupErr != nil {
		p("**Failed:** %v\n", r.DupErr)
	} else {
		p("| guard | goroutines | allow | passed | want | verdict |\n|---|---|---|---|---|---|\n")
		for _, d := range r.Dup {
			verdict := "holds"
			if !d.Holds {
				verdict = "**broken**"
			}
			p("| %s | %d | %d | %d | %d | %s |\n", d.Guard, d.Goroutines, d.Allow, d.Passed, d.Want, verdict)
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

func (r Report) firstSuite() string {
	if len(r.Outcomes) > 0 {
		return r.Outcomes[0].Suite.Name
	}
	return "outbox"
}

// writeFigures prints one row per benchmark and one column per unit, ns/op
// last (for most of these benchmarks it is the wall time of a whole run).
func writeFigures(w io.Writer, f Figures) {
	names := make([]string, 0, len(f))
	unitSet := map[string]bool{}
	for name, units := range f {
		names = append(names, name)
		for u := range units {
			unitSet[u] = true
		}
	}
	slices.Sort(names)
	var units []string
	for u := range unitSet {
		if u != "ns/op" {
			units = append(units, u)
		}
	}
	slices.Sort(units)
	if unitSet["ns/op"] {
		units = append(units, "ns/op")
	}
	fmt.Fprintf(w, "| benchmark | %s |\n|---|%s\n", strings.Join(units, " | "), strings.Repeat("---|", len(units)))
	for _, name := range names {
		cells := make([]string, len(units))
		for i, u := range units {
			s, ok := f[name][u]
			switch {
			case !ok:
				cells[i] = ""
			case s.Runs > 1:
				cells[i] = fmt.Sprintf("%s (%s–%s)", num(s.Median), num(s.Min), num(s.Max))
			default:
				cells[i] = num(s.Median)
			}
		}
		fmt.Fprintf(w, "| %s | %s |\n", name, strings.Join(cells, " | "))
	}
}

// num formats a figure: thousands separated, at most three significant
// decimals for small values.
func num(v float64) string {
	switch {
	case v >= 1000:
		return thousands(strconv.FormatFloat(v, 'f', 0, 64))
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}

func thousands(s string) string {
	var out []byte
	for i, c := range []byte(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, c)
	}
	return string(out)
}

func esc(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
