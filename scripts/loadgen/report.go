package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// Report is a run's result; --json prints it as it is.
type Report struct {
	Mode        string  `json:"mode"` // running programs (make run's, or the flags'), own rig, chaos
	Tag         string  `json:"tag"`  // names the run's products, keys and databases
	Seed        int64   `json:"seed"`
	Replicas    int     `json:"replicas"`
	Rate        float64 `json:"rate,omitempty"`
	Concurrency int     `json:"concurrency,omitempty"`
	Duration    float64 `json:"duration_s"`
	// Catalog is what the run set up: its products, coupon templates and
	// the customers' ids (UserBase + purchase number).
	Catalog catalog `json:"catalog"`

	Purchases          int            `json:"purchases_started"`
	PurchasesPerSecond float64        `json:"purchases_started_per_second"`
	Outcomes           map[string]int `json:"outcomes"`
	// Flow is the end-to-end timing and throughput, from the databases.
	Flow FlowLatency `json:"flow"`
	// Requests is each HTTP step's latency (answered tries) and retries.
	Requests map[string]RequestStats `json:"requests"`
	// FailedTries counts the tries that got no answer or one a client
	// retries, by "step: kind" (timeout, connection, 500, 409 in progress);
	// RefusedTries the 503 and 429 answers, by "step: status". Each was
	// retried with the same Idempotency-Key, as RetryPolicy says.
	FailedTries  map[string]int `json:"failed_tries"`
	RefusedTries map[string]int `json:"refused_tries"`
	RetryPolicy  string         `json:"retry_policy"`
	// RetriesDenied counts the retries the budget refused (the request
	// failed instead).
	RetriesDenied int `json:"retries_denied_by_budget"`
	// ProxyInPath says whose database the fault proxy was in front of.
	ProxyInPath string `json:"fault_proxy_in_path_of"`

	// Cost is what the load's completed purchases cost; Phases each
	// phase's figures.
	Cost   *Cost         `json:"cost,omitempty"`
	Phases []PhaseReport `json:"phases"`

	Invariants     []Check `json:"invariants"`
	InvariantsHold bool    `json:"invariants_hold"`
	Settled        float64 `json:"settled_after_s"`

	Jobs []JobCount `json:"jobs"`

	FaultCounts map[string]int `json:"fault_counts,omitempty"`
	Faults      []Fault        `json:"faults,omitempty"`
	Restarts    map[string]int `json:"restarts,omitempty"`
	KeptRig     string         `json:"kept_rig,omitempty"`
}

// RequestStats is one HTTP step's figures: the latency of the answers
// kept and of the refusals (503, 429), and the retries.
type RequestStats struct {
	Answered Percentiles `json:"answered"`
	Refused  Percentiles `json:"refused"`
	Retries  int         `json:"retries"`
}

// WriteText prints the report for a person.
func (r *Report) WriteText(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	load := fmt.Sprintf("%.0f purchases/s", r.Rate)
	if r.Rate == 0 {
		load = fmt.Sprintf("%d workers", r.Concurrency)
	}
	if len(r.Phases) > 1 || (len(r.Phases) == 1 && r.Phases[0].Fault != "") {
		var ps []string
		for _, ph := range r.Phases {
			ps = append(ps, ph.Phase)
		}
		load = "phases " + strings.Join(ps, ", ")
	}
	p("== loadgen %s: %s, %d replica(s), %s for %.0fs, seed %d\n", r.Tag, r.Mode, r.Replicas, load, r.Duration, r.Seed)
	p("   clients retry %s; fault proxy in front of: %s\n\n", r.RetryPolicy, r.ProxyInPath)
	p("purchases started   %d (%.1f/s)\n", r.Purchases, r.PurchasesPerSecond)
	p("orders              %d: %d PAID, %d CANCELLED, %d WAIT_PAY\n", r.Flow.Orders, r.Flow.Paid, r.Flow.Cancelled, r.Flow.WaitPay)
	p("completed           %d end to end (PAID, coupon USED if any); %d during the load's %.0fs: %.1f/s goodput\n",
		r.Flow.Completed, r.Flow.CompletedInWindow, r.Duration, r.Flow.PerSecond)
	if r.Cost != nil {
		r.Cost.writeText(w)
	}
	r.writePhases(w)

	p("\noutcomes\n")
	for _, k := range slices.Sorted(maps.Keys(r.Outcomes)) {
		p("  %-42s %d\n", k, r.Outcomes[k])
	}
	p("\nflow latency (from the databases)   count      p50      p90      p99      max  (ms)\n")
	row := func(name string, q Percentiles) {
		p("  %-33s %6d %8.0f %8.0f %8.0f %8.0f\n", name, q.Count, q.P50, q.P90, q.P99, q.Max)
	}
	row("order created → payment recorded", r.Flow.CreatedToPaymentRecorded)
	row("order created → order PAID", r.Flow.CreatedToOrderPaid)
	row("order created → coupon USED", r.Flow.CreatedToCouponUsed)
	p("\nrequests (answers kept)             count      p50      p90      p99      max  (ms)  retries  refused (p99 ms)\n")
	for _, k := range slices.Sorted(maps.Keys(r.Requests)) {
		q := r.Requests[k]
		ref := ""
		if q.Refused.Count > 0 {
			ref = fmt.Sprintf("  %d (%.1f)", q.Refused.Count, q.Refused.P99)
		}
		p("  %-33s %6d %8.1f %8.1f %8.1f %8.1f  %7d%s\n", k, q.Answered.Count, q.Answered.P50, q.Answered.P90, q.Answered.P99, q.Answered.Max, q.Retries, ref)
	}
	p("\nfailed tries (no answer, or one a client retries; each retried with its key)\n")
	if len(r.FailedTries) == 0 {
		p("  none\n")
	}
	for _, k := range slices.Sorted(maps.Keys(r.FailedTries)) {
		p("  %-42s %d\n", k, r.FailedTries[k])
	}
	p("\nrefused tries (503, 429)\n")
	if len(r.RefusedTries) == 0 {
		p("  none\n")
	}
	for _, k := range slices.Sorted(maps.Keys(r.RefusedTries)) {
		p("  %-42s %d\n", k, r.RefusedTries[k])
	}
	if r.RetriesDenied > 0 {
		p("  retries the budget refused (the request failed instead): %d\n", r.RetriesDenied)
	}
	if len(r.Faults) > 0 {
		p("\nfaults injected\n")
		for _, k := range slices.Sorted(maps.Keys(r.FaultCounts)) {
			p("  %-42s %d\n", k, r.FaultCounts[k])
		}
		var names []string
		for _, n := range slices.Sorted(maps.Keys(r.Restarts)) {
			names = append(names, fmt.Sprintf("%s×%d", n, r.Restarts[n]))
		}
		if len(names) > 0 {
			p("  restarts: %s\n", strings.Join(names, " "))
		}
		for _, f := range r.Faults {
			if f.Kind == faultDBCut || f.Kind == faultDBBlackhole || f.Kind == faultNATSDown || f.Kind == "heal" {
				p("  %6.1fs  %-12s %s\n", f.At, f.Kind, f.What)
			}
		}
	}
	if len(r.Jobs) > 0 {
		p("\njobs (intervals claimed in Redis; runs counted by the replicas)\n")
		p("  %-34s %8s %6s %6s %9s %7s %7s %7s\n", "service/job", "claimed", "twice", "ran", "per intv", "taken", "locked", "unlockd")
		for _, j := range r.Jobs {
			p("  %-34s %8d %6d %6d %9.2f %7d %7d %7d\n", j.Service+"/"+j.Job, j.Claimed, j.ClaimedTwice, j.Ran, j.RunsPerInterval, j.Taken, j.Locked, j.Unlocked)
		}
	}
	p("\ninvariants (settled after %.1fs)\n", r.Settled)
	for _, c := range r.Invariants {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		p("  %s %s", mark, c.Name)
		if c.Found != "" {
			p(": %s", c.Found)
		}
		p("\n")
	}
	if r.InvariantsHold {
		p("\nall invariants hold\n")
	} else {
		p("\nINVARIANTS BROKEN\n")
		if r.KeptRig != "" {
			p("kept for inspection: %s\n", r.KeptRig)
		}
	}
}

// writeText prints the cost per completed purchase.
func (c *Cost) writeText(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("\ncost per completed purchase: the load's %.1fs, %d completed in it; the %.1fs idle window's rate subtracted\n", c.Seconds, c.Completed, c.IdleSeconds)
	p("  %-14s %5s %9s %10s %7s %12s  %s\n", "CPU", "procs", "cpu-s", "idle cpu-s", "cores", "ms/purchase", "RSS MiB after")
	var uncountedNames []string
	for _, u := range c.CPU {
		mark := ""
		if !u.Counted {
			mark = " (not counted)"
			uncountedNames = append(uncountedNames, u.Group)
		}
		rss := make([]string, len(u.RSSMiB))
		for i, v := range u.RSSMiB {
			rss[i] = fmt.Sprintf("%.0f", v)
		}
		p("  %-14s %5d %9.1f %10.1f %7.2f %12.2f  %s%s\n", u.Group, u.Procs, u.CPUSeconds, u.IdleCPUSeconds, u.Cores, u.MsPerPurchase, strings.Join(rss, " "), mark)
	}
	slices.Sort(uncountedNames)
	p("  => %.1f ms of CPU per completed purchase (every process but %s; %.1f ms with the idle CPU left in)\n", c.CPUMsPerPurchase, strings.Join(uncountedNames, ", "), c.CPUMsPerPurchaseIdleIn)
	p("  machine: %d CPUs, %.0f%% busy during the load, %.0f%% in the idle window (everyone's use: the machine may be shared)\n", c.CPUs, c.BusyPct, c.IdleBusyPct)
	p("  work per completed purchase, idle subtracted\n")
	var kinds, cmds []string
	for _, x := range c.Work {
		switch {
		case strings.HasPrefix(x.Key, "sql:"):
			if x.PerPurchase >= 0.05 {
				kinds = append(kinds, fmt.Sprintf("%s %.1f", x.What, x.PerPurchase))
			}
		case strings.HasPrefix(x.Key, "redis:"):
			if x.PerPurchase >= 0.05 {
				cmds = append(cmds, fmt.Sprintf("%s %.1f", x.What, x.PerPurchase))
			}
		default:
			p("    %8.2f  %s\n", x.PerPurchase, x.What)
		}
	}
	if len(kinds) > 0 {
		p("    SQL by kind: %s\n", strings.Join(kinds, ", "))
	}
	if len(cmds) > 0 {
		p("    Redis by command: %s\n", strings.Join(cmds, ", "))
	}
	for _, src := range slices.Sorted(maps.Keys(c.Unread)) {
		p("    not read: %s (%s)\n", src, c.Unread[src])
	}
}

// writePhases prints one line per phase.
func (r *Report) writePhases(w io.Writer) {
	if len(r.Phases) == 0 {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("\nphases (requests by when they were sent; flow of the purchases started in the phase; goodput: completed during it)\n")
	p("  %-22s %7s %9s %7s %15s %17s %6s %15s %9s %9s\n", "phase", "started", "goodput/s", "cpu ms", "admitted p50/99", "refused n (p99)", "failed", "→PAID p50/99", "→USED p99", "recovered")
	for _, ph := range r.Phases {
		cpu := "–"
		if ph.Cost != nil {
			cpu = fmt.Sprintf("%.1f", ph.Cost.CPUMsPerPurchase)
		}
		rec := "–"
		if ph.RecoveredAfter != nil {
			rec = fmt.Sprintf("%.0fs", *ph.RecoveredAfter)
		} else if ph.Recovery != "" {
			rec = "no"
		}
		p("  %-22s %7d %9.1f %7s %7.0f/%-7.0f %7d (%7.1f) %6d %7.0f/%-7.0f %9.0f %9s\n", ph.Phase, ph.Started, ph.Goodput, cpu,
			ph.Admitted.P50, ph.Admitted.P99, ph.Refused.Count, ph.Refused.P99, ph.Failed,
			ph.Flow.CreatedToOrderPaid.P50, ph.Flow.CreatedToOrderPaid.P99, ph.Flow.CreatedToCouponUsed.P99, rec)
	}
	p("  max RSS MiB and /readyz not ready / polls, per phase\n")
	for _, ph := range r.Phases {
		var parts []string
		for _, g := range slices.Sorted(maps.Keys(ph.MaxRSSMiB)) {
			parts = append(parts, fmt.Sprintf("%s %.0f", g, ph.MaxRSSMiB[g]))
		}
		var ready []string
		for _, s := range slices.Sorted(maps.Keys(ph.Ready)) {
			ready = append(ready, fmt.Sprintf("%s %d/%d", s, ph.Ready[s].NotReady, ph.Ready[s].Polls))
		}
		p("  %-22s RSS: %s; not ready: %s\n", ph.Phase, strings.Join(parts, ", "), strings.Join(ready, ", "))
	}
	p("  the customers' tries by what they got, per phase\n")
	for _, ph := range r.Phases {
		var parts []string
		for _, a := range slices.Sorted(maps.Keys(ph.Answers)) {
			parts = append(parts, fmt.Sprintf("%s %d", a, ph.Answers[a]))
		}
		p("  %-22s %s\n", ph.Phase, strings.Join(parts, ", "))
	}
	for i, ph := range r.Phases {
		if i > 0 && ph.Recovery != "" {
			p("  recovery of %s: %s\n", ph.Phase, ph.Recovery)
			break
		}
	}
}
