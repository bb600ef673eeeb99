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
	// FailedTries counts the tries that failed, by "step: kind" (timeout,
	// connection, a 5xx status, 409 in progress); each was retried with the
	// same Idempotency-Key until --retry-for.
	FailedTries map[string]int `json:"failed_tries"`

	Invariants     []Check `json:"invariants"`
	InvariantsHold bool    `json:"invariants_hold"`
	Settled        float64 `json:"settled_after_s"`

	Jobs    []JobCount `json:"jobs"`
	Usage   []Usage    `json:"usage"`
	Machine Machine    `json:"machine"`

	FaultCounts map[string]int `json:"fault_counts,omitempty"`
	Faults      []Fault        `json:"faults,omitempty"`
	Restarts    map[string]int `json:"restarts,omitempty"`
	KeptRig     string         `json:"kept_rig,omitempty"`
}

// RequestStats is one HTTP step's figures.
type RequestStats struct {
	Answered Percentiles `json:"answered"`
	Retries  int         `json:"retries"`
}

// WriteText prints the report for a person.
func (r *Report) WriteText(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	load := fmt.Sprintf("%.0f purchases/s", r.Rate)
	if r.Rate == 0 {
		load = fmt.Sprintf("%d workers", r.Concurrency)
	}
	p("== loadgen %s: %s, %d replica(s), %s for %.0fs, seed %d\n\n", r.Tag, r.Mode, r.Replicas, load, r.Duration, r.Seed)
	p("purchases started   %d (%.1f/s)\n", r.Purchases, r.PurchasesPerSecond)
	p("orders              %d: %d PAID, %d CANCELLED, %d WAIT_PAY\n", r.Flow.Orders, r.Flow.Paid, r.Flow.Cancelled, r.Flow.WaitPay)
	p("completed           %d end to end (PAID, coupon USED if any); %d within the load's %.0fs: %.1f/s sustained\n\n",
		r.Flow.Completed, r.Flow.CompletedInWindow, r.Duration, r.Flow.PerSecond)

	p("outcomes\n")
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
	p("\nrequests (answered tries)           count      p50      p90      p99      max  (ms)  retries\n")
	for _, k := range slices.Sorted(maps.Keys(r.Requests)) {
		q := r.Requests[k]
		p("  %-33s %6d %8.1f %8.1f %8.1f %8.1f  %7d\n", k, q.Answered.Count, q.Answered.P50, q.Answered.P90, q.Answered.P99, q.Answered.Max, q.Retries)
	}
	p("\nfailed tries (each retried with its key)\n")
	if len(r.FailedTries) == 0 {
		p("  none\n")
	}
	for _, k := range slices.Sorted(maps.Keys(r.FailedTries)) {
		p("  %-42s %d\n", k, r.FailedTries[k])
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
		p("  restarts: %s\n", strings.Join(names, " "))
	}
	if len(r.Jobs) > 0 {
		p("\njobs (intervals claimed in Redis; runs counted by the replicas)\n")
		p("  %-34s %8s %6s %6s %9s %7s %7s %7s\n", "service/job", "claimed", "twice", "ran", "per intv", "taken", "locked", "unlockd")
		for _, j := range r.Jobs {
			p("  %-34s %8d %6d %6d %9.2f %7d %7d %7d\n", j.Service+"/"+j.Job, j.Claimed, j.ClaimedTwice, j.Ran, j.RunsPerInterval, j.Taken, j.Locked, j.Unlocked)
		}
	}
	if len(r.Usage) > 0 {
		p("\nCPU during the load, RSS after (machine: %d CPUs, %.0f%% busy, %.2f cores measured here)\n", r.Machine.CPUs, r.Machine.BusyPct, r.Machine.Measured)
		for _, u := range r.Usage {
			rss := make([]string, len(u.RSSMB))
			for i, v := range u.RSSMB {
				rss[i] = fmt.Sprintf("%.0f", v)
			}
			p("  %-14s %2d proc  %7.1f cpu-s  %5.2f cores  RSS MiB %s\n", u.Group, u.Procs, u.CPUSeconds, u.Cores, strings.Join(rss, " "))
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
