package main

import (
	"strings"
	"testing"
	"time"
)

func TestParsePhases(t *testing.T) {
	got, err := parsePhases("300/s:60s, 75:30s,50/s:5m:db-cut,0.5/s:1m30s:nats-down")
	if err != nil {
		t.Fatal(err)
	}
	want := []Phase{{300, time.Minute, ""}, {75, 30 * time.Second, ""}, {50, 5 * time.Minute, faultDBCut}, {0.5, 90 * time.Second, faultNATSDown}}
	if len(got) != len(want) {
		t.Fatalf("%d phases, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("phase %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if s := got[2].String(); s != "50/s:5m0s:db-cut" {
		t.Errorf("String() = %q", s)
	}
	for _, bad := range []string{"", "300/s", "0/s:60s", "-1/s:60s", "x/s:60s", "300/s:0s", "300/s:soon", "300/s:60s:flood", "300/s:60s:db-cut:x"} {
		if _, err := parsePhases(bad); err == nil {
			t.Errorf("parsePhases(%q) accepted", bad)
		}
	}
}

func TestTimeline(t *testing.T) {
	tl := newTimeline([]Phase{{Rate: 10, Duration: 10 * time.Second}, {Rate: 20, Duration: 5 * time.Second, Fault: faultDBCut}, {Rate: 5, Duration: 10 * time.Second}})
	if tl.total != 25*time.Second || tl.end(1) != 15*time.Second {
		t.Fatalf("total %s, end of phase 1 %s", tl.total, tl.end(1))
	}
	for _, tc := range []struct {
		off  time.Duration
		want int
	}{{-time.Millisecond, -1}, {0, 0}, {9999 * time.Millisecond, 0}, {10 * time.Second, 1}, {15 * time.Second, 2}, {time.Hour, 2}} {
		if got := tl.at(tc.off); got != tc.want {
			t.Errorf("at(%s) = %d, want %d", tc.off, got, tc.want)
		}
	}
	if !tl.faults(faultDBCut) || tl.faults(faultNATSDown) {
		t.Error("faults() does not see the phases' faults")
	}
}

// TestFlagsPhases: --phases replaces --rate and --duration, a phase's fault
// needs the private rig and cannot be combined with chaos, and the fault
// proxy is in front of every database only when a phase cuts them.
func TestFlagsPhases(t *testing.T) {
	var errs strings.Builder
	cfg, err := parseFlags([]string{"--own", "--phases", "50/s:30s,50/s:60s:db-cut"}, &errs)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Phases) != 2 || cfg.Duration != 90*time.Second || cfg.Rate != 50 || cfg.proxied() != proxyAll {
		t.Fatalf("phases %+v, duration %s, rate %v, proxied %d", cfg.Phases, cfg.Duration, cfg.Rate, cfg.proxied())
	}
	for _, args := range [][]string{
		{"--phases", "50/s:30s", "--rate", "10"},
		{"--phases", "50/s:30s", "--duration", "10s"},
		{"--phases", "50/s:30s:nats-down"},
		{"--chaos", "--phases", "50/s:30s:db-cut"},
		{"--retry-budget", "-1"},
	} {
		if _, err := parseFlags(args, &errs); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
	for args, want := range map[string]int{"--own": proxyNone, "--chaos": proxyCoupon, "--own --phases 10/s:10s:nats-down": proxyNone} {
		cfg, err := parseFlags(strings.Fields(args), &errs)
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.proxied(); got != want {
			t.Errorf("%s: proxy %d, want %d", args, got, want)
		}
	}
	cfg, err = parseFlags([]string{"--rate", "40", "--duration", "20s"}, &errs)
	if err != nil || len(cfg.Phases) != 1 || cfg.Phases[0] != (Phase{Rate: 40, Duration: 20 * time.Second}) {
		t.Fatalf("--rate and --duration make phases %+v (%v)", cfg.Phases, err)
	}
}

// TestRecovery: the latencies are back to normal at the first of two
// windows in a row whose request and created → PAID p99s are within 1.5×
// the reference; an empty window is not normal, one good window alone is
// not enough, and a phase that never recovers says so.
func TestRecovery(t *testing.T) {
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	to := from.Add(10 * time.Second)
	ref := 100 * time.Millisecond
	// Per second: request p99 and paid p99 (0: nothing in that window).
	series := func(reqMs, paidMs []int) (req, paid []timed) {
		for i := range reqMs {
			at := from.Add(time.Duration(i)*time.Second + 500*time.Millisecond)
			for range 10 {
				if reqMs[i] > 0 {
					req = append(req, timed{at, time.Duration(reqMs[i]) * time.Millisecond})
				}
				if paidMs[i] > 0 {
					paid = append(paid, timed{at, time.Duration(paidMs[i]) * time.Millisecond})
				}
			}
		}
		return req, paid
	}
	for _, tc := range []struct {
		name      string
		req, paid []int
		after     time.Duration
		ok        bool
	}{
		{"normal at once", []int{100, 100, 100}, []int{100, 100, 100}, 0, true},
		{"after the backlog", []int{900, 400, 150, 140, 120}, []int{5000, 3000, 150, 150, 100}, 2 * time.Second, true},
		{"one lucky window is not enough", []int{900, 100, 900, 100, 100}, []int{900, 100, 900, 100, 100}, 3 * time.Second, true},
		{"requests fine, flow still behind", []int{100, 100, 100, 100}, []int{900, 900, 140, 120}, 2 * time.Second, true},
		{"an empty window is not normal", []int{100, 0, 100, 100}, []int{100, 100, 100, 100}, 2 * time.Second, true},
		{"never", []int{900, 900, 900, 900, 900, 900, 900, 900, 900, 900}, []int{100, 100, 100, 100, 100, 100, 100, 100, 100, 100}, 0, false},
	} {
		req, paid := series(tc.req, tc.paid)
		after, ok := recovery(req, paid, from, to, ref, ref)
		if ok != tc.ok || after != tc.after {
			t.Errorf("%s: recovered after %s (%v), want %s (%v)", tc.name, after, ok, tc.after, tc.ok)
		}
	}
}

// TestPhaseReports: requests count in the phase they were sent in, the
// flow in the phase its purchase started in, goodput in the phase the
// purchase completed in; recovery is judged after a drop in rate only.
func TestPhaseReports(t *testing.T) {
	began := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return began.Add(time.Duration(s * float64(time.Second))) }
	tl := newTimeline([]Phase{{Rate: 10, Duration: 10 * time.Second}, {Rate: 40, Duration: 10 * time.Second}, {Rate: 5, Duration: 10 * time.Second}})
	st := newStats()
	const base = 1_000_000
	// Purchase i starts at i seconds, in its phase; its order is PAID 0.2 s
	// later, except in the busy phase (5 s later).
	var rows []orderRow
	for i := range 30 {
		k := tl.at(time.Duration(i) * time.Second)
		st.purchases[uint64(i)] = purchaseRec{at: at(float64(i)), phase: k}
		took := 0.2
		if k == 1 {
			took = 5
		}
		rows = append(rows, orderRow{user: base + uint64(i), status: "PAID", created: at(float64(i)), updated: at(float64(i) + took)})
		st.tries = append(st.tries, tryRec{sent: at(float64(i)), took: 20 * time.Millisecond, step: "POST /orders", class: tryAnswered, status: 201, customer: true})
		st.tries = append(st.tries, tryRec{sent: at(float64(i) + 0.5), took: 20 * time.Millisecond, step: "POST /payments", class: tryAnswered, status: 201, customer: true})
		if k == 1 {
			st.tries = append(st.tries, tryRec{sent: at(float64(i) + 0.1), took: 3 * time.Millisecond, step: "POST /orders", class: tryRefused, status: 503, customer: true})
		}
	}
	st.tries = append(st.tries, tryRec{sent: at(-5), step: "setup: product", class: tryAnswered, status: 201})
	st.tries = append(st.tries, tryRec{sent: at(12), took: 5 * time.Second, step: "GET /admin/reconcile", class: tryAnswered, status: 200})
	st.tries = append(st.tries, tryRec{sent: at(45), took: time.Second, step: "POST /payments", class: tryFailed, kind: "timeout", customer: true})

	ps := phaseReports(phaseInput{tl: tl, began: began, rows: rows, userBase: base, st: st})
	if len(ps) != 3 {
		t.Fatalf("%d phases", len(ps))
	}
	if ps[0].Started != 10 || ps[1].Started != 10 || ps[1].Refused.Count != 10 || ps[1].Admitted.Count != 20 || ps[1].Answers["503"] != 10 || ps[2].Failed != 1 || ps[2].Answers["timeout"] != 1 {
		t.Fatalf("phases %+v", ps)
	}
	// Phase 0 completes its ten; phase 1's purchases complete 5 s late,
	// 10..14 within it and 15..19 in phase 2, which completes its own too.
	if ps[0].Completed != 10 || ps[1].Completed != 5 || ps[2].Completed != 15 || ps[1].Goodput != 0.5 {
		t.Fatalf("completed %d, %d, %d; goodput %v", ps[0].Completed, ps[1].Completed, ps[2].Completed, ps[1].Goodput)
	}
	if ps[1].Flow.Paid != 10 || ps[1].Flow.CreatedToOrderPaid.P50 != 5000 || ps[0].Flow.CreatedToOrderPaid.P50 != 200 {
		t.Fatalf("flows %+v %+v", ps[0].Flow, ps[1].Flow)
	}
	if ps[1].Recovery != "" || ps[1].RecoveredAfter != nil {
		t.Fatalf("recovery judged on a rise in rate: %+v", ps[1])
	}
	if ps[2].RecoveredAfter == nil || *ps[2].RecoveredAfter != 0 {
		t.Fatalf("phase 2 (its purchases paid in 0.2 s again, the requests as fast): recovered %v, %q", ps[2].RecoveredAfter, ps[2].Recovery)
	}
}
