package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// writeE2E renders the e2e suite's runs: the commands, one row per run
// with the machine's load beside it, the cost run's split, and each
// phased run's phases.
func writeE2E(w io.Writer, e *E2E, seconds float64) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	if e.Quick {
		p("**Quick run** (`--e2e-quick`: every duration divided by six): the figures show the suite works; no target is judged on them.\n\n")
	}
	p("%d runs of the load generator in %.0f s (parts: %s), each on a fresh private rig, from the repository root:\n\n```sh\n", len(e.Runs), seconds, strings.Join(e.Parts, ", "))
	for _, r := range e.Runs {
		p("%s\n", r.Command())
	}
	p("```\n\n")
	if e.Capacity > 0 {
		p("Capacity: **%.1f completed purchases/s** (the %s step).\n\n", e.Capacity, rate(e.CapacityAt))
	}
	p("| run | load average at its start | machine busy (load / idle window) | started | goodput | CPU ms per purchase | created → PAID p50 / p99 | → coupon USED p99 | invariants |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range e.Runs {
		if r.Report == nil {
			p("| %s | %s | | | | | | | **failed**: %s |\n", r.Name, r.Load, esc(firstLine(r.Err)))
			continue
		}
		rep := r.Report
		busy, cpu := "–", "–"
		if rep.Cost != nil {
			busy = fmt.Sprintf("%.0f %% / %.0f %%", rep.Cost.BusyPct, rep.Cost.IdleBusyPct)
			cpu = fmt.Sprintf("%.1f", rep.Cost.CPUMsPerPurchase)
		}
		inv := fmt.Sprintf("all %d hold", len(rep.Invariants))
		if !rep.InvariantsHold {
			inv = "**broken**: " + esc(strings.Join(rep.broken(), "; "))
		}
		p("| %s | %s | %s | %d | %.1f/s | %s | %.0f / %.0f ms | %.0f ms | %s |\n", r.Name, r.Load, busy, rep.Purchases, rep.Flow.PerSecond, cpu,
			rep.Flow.CreatedToOrderPaid.P50, rep.Flow.CreatedToOrderPaid.P99, rep.Flow.CreatedToCouponUsed.P99, inv)
	}
	if cost := e.run("cost", ""); cost != nil && cost.Report.Cost != nil {
		c := cost.Report.Cost
		p("\nWhat a completed purchase cost in the %s run (%.0f s, %d completed; the %.0f s idle window's rate subtracted):\n\n", cost.Name, c.Seconds, c.Completed, c.IdleSeconds)
		p("| process | cores | CPU ms per purchase |\n|---|---|---|\n")
		for _, g := range c.CPU {
			name := g.Group
			if !g.Counted {
				name += " (not counted)"
			}
			p("| %s | %.2f | %.2f |\n", name, g.Cores, g.MsPerPurchase)
		}
		p("| **counted** | | **%.1f** |\n\n", c.CPUMsPerPurchase)
		p("| work per purchase | |\n|---|---|\n")
		byPrefix := map[string][]string{}
		for _, x := range c.Work {
			prefix, _, _ := strings.Cut(x.Key, ":")
			if prefix == "sql" || prefix == "redis" {
				if x.PerPurchase >= 0.05 {
					byPrefix[prefix] = append(byPrefix[prefix], fmt.Sprintf("%s %.1f", x.What, x.PerPurchase))
				}
				continue
			}
			p("| %s | %.2f |\n", esc(x.What), x.PerPurchase)
		}
		if kinds := byPrefix["sql"]; len(kinds) > 0 {
			p("| SQL statements by kind | %s |\n", strings.Join(kinds, ", "))
		}
		if cmds := byPrefix["redis"]; len(cmds) > 0 {
			p("| Redis commands by name | %s |\n", strings.Join(cmds, ", "))
		}
		for _, src := range slices.Sorted(maps.Keys(c.Unread)) {
			p("| not read: %s | %s |\n", src, esc(c.Unread[src]))
		}
	}
	for _, r := range e.Runs {
		if r.Report == nil || len(r.Report.Phases) < 2 {
			continue
		}
		p("\n%s, phase by phase (requests by when they were sent; the flow of the purchases started in the phase):\n\n", r.Name)
		p("| phase | goodput | admitted p50 / p99 | refused (p99) | failed tries | → PAID p99 | max RSS order / coupon / payment | /readyz not ready | answers | recovered |\n|---|---|---|---|---|---|---|---|---|---|\n")
		for _, ph := range r.Report.Phases {
			share, polls := ph.notReady()
			rec := "–"
			switch {
			case ph.RecoveredAfter != nil:
				rec = fmt.Sprintf("after %.0f s", *ph.RecoveredAfter)
			case ph.Recovery != "":
				rec = "no"
			}
			var answers []string
			for _, a := range slices.Sorted(maps.Keys(ph.Answers)) {
				answers = append(answers, fmt.Sprintf("%s × %d", a, ph.Answers[a]))
			}
			p("| %s | %.1f/s | %.0f / %.0f ms | %d (%.1f ms) | %d | %.0f ms | %.0f / %.0f / %.0f MiB | %.0f %% of %d | %s | %s |\n", ph.Phase, ph.Goodput, ph.Admitted.P50, ph.Admitted.P99,
				ph.Refused.Count, ph.Refused.P99, ph.Failed, ph.Flow.CreatedToOrderPaid.P99, ph.MaxRSSMiB["order"], ph.MaxRSSMiB["coupon"], ph.MaxRSSMiB["payment"], 100*share, polls, strings.Join(answers, ", "), rec)
		}
	}
}

func firstLine(err error) string {
	if err == nil {
		return ""
	}
	l, _, _ := strings.Cut(err.Error(), "\n")
	return l
}
