package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeLoad answers planE2E's runs with the reports of reply, keyed by the
// run's name, and records the commands.
type fakeLoad struct {
	reply    func(name string, args []string) *loadReport
	commands []string
}

func (f *fakeLoad) load(_ context.Context, part, name string, args ...string) *e2eRun {
	r := &e2eRun{Part: part, Name: name, Args: append([]string{"--own"}, args...), Load: "1.00 1.00 1.00"}
	f.commands = append(f.commands, r.Command())
	r.Report = f.reply(name, args)
	return r
}

// steady is a one-phase report completing goodput purchases/s.
func steady(goodput float64) *loadReport {
	r := &loadReport{Tag: "t", InvariantsHold: true, Phases: []loadPhase{{Phase: "x", Goodput: goodput}}}
	r.Flow.PerSecond = goodput
	return r
}

// TestPlanE2ESteps: the capacity is stepped up to the first step that
// completes less than 90 % of what it offers (the 100/s step is the cost
// run, made first), and the overload runs at twice the most completed.
func TestPlanE2ESteps(t *testing.T) {
	goodput := map[string]float64{"cost 100/s": 28, "capacity 25/s": 24.5, "capacity 50/s": 31}
	f := &fakeLoad{reply: func(name string, _ []string) *loadReport {
		if g, ok := goodput[name]; ok {
			return steady(g)
		}
		return steady(1)
	}}
	e, err := planE2E(context.Background(), e2eParts, false, f.load)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"go run ./scripts/loadgen --own --rate 100 --duration 1m0s --settle 5m",
		"go run ./scripts/loadgen --own --rate 25 --duration 1m0s --settle 5m",
		"go run ./scripts/loadgen --own --rate 50 --duration 1m0s --settle 5m",
		"go run ./scripts/loadgen --own --phases 16/s:30s,62/s:1m0s,16/s:30s --settle 5m",
		"go run ./scripts/loadgen --own --retry-at-once --phases 62/s:1m0s --settle 5m",
		"go run ./scripts/loadgen --own --phases 50/s:1m0s,50/s:5m0s:db-cut,50/s:2m0s --settle 10m",
		"go run ./scripts/loadgen --own --phases 50/s:1m0s,50/s:5m0s:nats-down,50/s:2m0s --settle 10m",
	}
	if !slices.Equal(f.commands, want) {
		t.Fatalf("runs:\n%s\nwant:\n%s", strings.Join(f.commands, "\n"), strings.Join(want, "\n"))
	}
	if e.Capacity != 31 || e.CapacityAt != 50 || !e.CapacityHeld {
		t.Fatalf("capacity %v at %v (held %v), want 31 at 50", e.Capacity, e.CapacityAt, e.CapacityHeld)
	}

	// A system that keeps up is stepped until it does not.
	f = &fakeLoad{reply: func(name string, args []string) *loadReport {
		for i, a := range args {
			if a == "--rate" {
				r := map[string]float64{"25": 25, "50": 50, "100": 99, "150": 149, "200": 160}[args[i+1]]
				return steady(r)
			}
		}
		return steady(1)
	}}
	e, err = planE2E(context.Background(), []string{"capacity"}, false, f.load)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.commands) != 5 || e.Capacity != 160 || e.CapacityAt != 200 {
		t.Fatalf("%d runs, capacity %v at %v; want 5 runs up to the saturated 200/s, 160", len(f.commands), e.Capacity, e.CapacityAt)
	}

	// Quick: three steps at most, every duration a sixth.
	f = &fakeLoad{reply: func(string, []string) *loadReport { return steady(1000) }}
	if _, err := planE2E(context.Background(), []string{"capacity", "outage-nats"}, true, f.load); err != nil {
		t.Fatal(err)
	}
	if len(f.commands) != 4 || !strings.Contains(f.commands[0], "--duration 10s") || !strings.Contains(f.commands[3], "50/s:10s,50/s:50s:nats-down,50/s:20s") {
		t.Fatalf("quick runs:\n%s", strings.Join(f.commands, "\n"))
	}
}

// e2eFixture is a suite's worth of runs: the cost run, a capacity of 30/s,
// an overload run that sheds, clients retrying at once, and two outages,
// the MySQL one dead-lettering.
func e2eFixture() *E2E {
	cost := steady(28)
	cost.Flow.CreatedToOrderPaid = pct{Count: 1000, P50: 150, P99: 450}
	cost.Flow.CreatedToCouponUsed = pct{Count: 700, P50: 600, P99: 1800}
	cost.Invariants = []struct {
		Name  string `json:"name"`
		OK    bool   `json:"ok"`
		Found string `json:"found"`
	}{{Name: "one payment per order", OK: true}}
	cost.Cost = &loadCost{CPUMsPerPurchase: 45.2, Completed: 1680}
	cost.Cost.Work = append(cost.Cost.Work, struct {
		Key         string  `json:"key"`
		What        string  `json:"what"`
		PerPurchase float64 `json:"per_purchase"`
	}{"sql_statements", "SQL statements", 78.04})

	recovered := 7.0
	over := &loadReport{Tag: "o", InvariantsHold: true, Phases: []loadPhase{
		{Phase: "15/s:30s", Goodput: 15, MaxRSSMiB: map[string]float64{"order": 60, "coupon": 40, "payment": 45}},
		{Phase: "60/s:1m0s", Goodput: 28, Refused: pct{Count: 900, P99: 4.2}, MaxRSSMiB: map[string]float64{"order": 161.5, "coupon": 50, "payment": 70, "mariadb": 900}},
		{Phase: "15/s:30s", Goodput: 15, RecoveredAfter: &recovered, Recovery: "first of two …"},
	}}
	over.Phases[1].Flow.CreatedToOrderPaid = pct{Count: 800, P99: 2500}
	bad := &loadReport{Tag: "b", InvariantsHold: true, Phases: []loadPhase{{Phase: "60/s:1m0s", Goodput: 24}}}

	outage := func(deadLettered bool) *loadReport {
		r := &loadReport{Tag: "m", InvariantsHold: !deadLettered, Phases: []loadPhase{{Phase: "50/s:1m0s"}, {Phase: "50/s:5m0s:db-cut",
			Answers: map[string]int{"503": 900, "500": 100},
			Refused: pct{Count: 900, P99: 30},
			Ready: map[string]struct {
				Polls    int `json:"polls"`
				NotReady int `json:"not_ready"`
			}{"order": {300, 299}, "coupon": {300, 298}, "payment": {300, 297}}}, {Phase: "50/s:2m0s"}}}
		found := ""
		if deadLettered {
			found = "12 rows"
		}
		r.Invariants = append(r.Invariants, struct {
			Name  string `json:"name"`
			OK    bool   `json:"ok"`
			Found string `json:"found"`
		}{deadLetters, !deadLettered, found})
		return r
	}
	return &E2E{Parts: e2eParts, Capacity: 30, CapacityAt: 50, CapacityHeld: true, Runs: []*e2eRun{
		{Part: "cost", Name: "cost 100/s", Report: cost, Load: "1.00 1.00 1.00"},
		{Part: "overload", Name: "overload", Report: over},
		{Part: "retry-at-once", Name: "retry at once", Report: bad},
		{Part: "outage-mysql", Name: "outage-mysql", Report: outage(true)},
		{Part: "outage-nats", Name: "outage-nats", Report: outage(false)},
	}}
}

func TestEvaluateE2E(t *testing.T) {
	got := map[string]string{}
	for _, c := range evaluateE2E(e2eFixture()) {
		got[c.Area+": "+c.Target] = c.Status + " " + c.Value
	}
	for target, want := range map[string]string{
		"e2e: cost: CPU per completed purchase ≤ 10 ms at 100/s offered for 60 s, 1 replica, every invariant holding (idle subtracted; every process but the load generator and the fault proxy)": "not met 45.2 ms (1680 completed)",
		"e2e: cost: SQL statements per completed purchase":                                                                                                                               "figure only 78.0",
		"e2e: cost: fsyncs per completed purchase":                                                                                                                                       "not measured –",
		"e2e: latency: created → order PAID p99 ≤ 500 ms at 100/s offered":                                                                                                               "met 450 ms (p50 150 ms, 1000)",
		"e2e: latency: created → coupon USED p99 ≤ 1 s at 100/s offered":                                                                                                                 "not met 1800 ms (p50 600 ms, 700)",
		"e2e: capacity: ≥ 150 completed purchases/s sustained for 60 s (the most of the stepped runs, invariants holding)":                                                               "not met 30.0/s at 50/s offered",
		"e2e: overload: at 2× capacity (60/s offered) for 60 s: goodput ≥ 90 % of capacity":                                                                                              "met 28.0/s = 93 % of 30.0/s",
		"e2e: overload: at 2× capacity (60/s offered) for 60 s: refusals answered in ≤ 10 ms p99":                                                                                        "met 4.2 ms (900 refusals)",
		"e2e: overload: at 2× capacity (60/s offered) for 60 s: admitted purchases' created → PAID p99 ≤ 1 s":                                                                            "not met 2500 ms (p50 0 ms, 800)",
		"e2e: overload: at 2× capacity (60/s offered) for 60 s: RSS ≤ 150 MiB per service":                                                                                               "not met 162 MiB (order)",
		"e2e: overload: back to normal within 10 s of dropping to half capacity (1 s windows: requests' and created → PAID p99 within 1.5× the first half-capacity phase's)":             "met 7 s",
		"e2e: bad clients: at 2× capacity (60/s offered) for 60 s, clients retrying at once (Retry-After ignored, no budget): goodput ≥ 70 % of capacity":                                "met 24.0/s = 80 % of 30.0/s",
		"e2e: outage: MySQL cut at the fault proxy in front of every service for 5 min under 50 purchases/s: after recovery every invariant holds":                                       "not met 1 broken: " + deadLetters + " (12 rows)",
		"e2e: outage: MySQL cut at the fault proxy in front of every service for 5 min under 50 purchases/s: nothing dead-lettered":                                                      "not met dead letters: 12 rows",
		"e2e: outage: MySQL cut at the fault proxy in front of every service for 5 min under 50 purchases/s: the services report not ready during it (≥ 90 % of /readyz polls)":          "met 99 % of 900 polls",
		"e2e: outage: MySQL cut at the fault proxy in front of every service for 5 min under 50 purchases/s: the services answer 503 during it (≥ 95 % of the customers' tries refused)": "not met 90 % of 1000 tries; others: 500 × 100",
		"e2e: outage: MySQL cut at the fault proxy in front of every service for 5 min under 50 purchases/s: … fast (their p99 ≤ 100 ms)":                                                "met 30 ms (p50 0 ms, 900)",
		"e2e: outage: the rig's NATS down for 5 min under 50 purchases/s: nothing dead-lettered":                                                                                         "met none",
	} {
		if got[target] != want {
			t.Errorf("%s:\n  %q\nwant %q", target, got[target], want)
		}
	}

	// Without runs nothing is measured; a quick run judges nothing.
	for _, c := range evaluateE2E(&E2E{Parts: e2eParts}) {
		if c.Status != Missing {
			t.Errorf("no runs: %s %s is %s", c.Area, c.Target, c.Status)
		}
	}
	quick := e2eFixture()
	quick.Quick = true
	for _, c := range evaluateE2E(quick) {
		if c.Status == Met || c.Status == NotMet {
			t.Errorf("quick run judged %s: %s", c.Target, c.Status)
		}
	}
}

func TestWriteE2E(t *testing.T) {
	e := e2eFixture()
	e.Runs[0].Args = []string{"--own", "--rate", "100"}
	var b bytes.Buffer
	writeE2E(&b, e, 3600)
	for _, want := range []string{
		"go run ./scripts/loadgen --own --rate 100\n",
		"Capacity: **30.0 completed purchases/s** (the 50/s step).",
		"| cost 100/s | 1.00 1.00 1.00 |",
		"| **counted** | | **45.2** |",
		"overload, phase by phase",
		"| 60/s:1m0s | 28.0/s |",
		"| 15/s:30s | 15.0/s | 0 / 0 ms | 0 (0.0 ms) | 0 | 0 ms | 0 / 0 / 0 MiB | 0 % of 0 |  | after 7 s |",
		"**broken**: " + deadLetters + " (12 rows)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("e2e section lacks %q:\n%s", want, b.String())
		}
	}
}

func TestParseE2EParts(t *testing.T) {
	if p, err := parseE2EParts("all"); err != nil || !slices.Equal(p, e2eParts) {
		t.Fatalf("all = %v %v", p, err)
	}
	if p, err := parseE2EParts("cost, outage-nats"); err != nil || !slices.Equal(p, []string{"cost", "outage-nats"}) {
		t.Fatalf("%v %v", p, err)
	}
	if _, err := parseE2EParts("cost,flood"); err == nil {
		t.Fatal("unknown part accepted")
	}
}

// TestLoadgenReportsParse reads real reports of the load generator
// (testdata/, written by its --json): every figure the suite judges is
// found under the names the load generator writes.
func TestLoadgenReportsParse(t *testing.T) {
	files, err := filepath.Glob("testdata/loadgen-*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata/loadgen-*.json: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r, err := parseLoadReport(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if r.Cost == nil || r.Cost.CPUMsPerPurchase <= 0 || len(r.Cost.CPU) == 0 || r.Flow.CreatedToOrderPaid.Count == 0 || len(r.Invariants) < 20 {
			t.Errorf("%s: figures missing: cost %+v, flow %+v, %d invariants", f, r.Cost, r.Flow, len(r.Invariants))
		}
		if _, ok := r.Cost.work("sql_statements"); !ok {
			t.Errorf("%s: no SQL statements per purchase", f)
		}
		if _, judged := r.invariant(deadLetters); !judged {
			t.Errorf("%s: no invariant named %q", f, deadLetters)
		}
		for _, p := range r.Phases {
			if p.Phase == "" || p.Seconds == 0 || len(p.Answers) == 0 || len(p.Ready) == 0 || len(p.MaxRSSMiB) == 0 {
				t.Errorf("%s: phase figures missing: %+v", f, p)
			}
		}
	}
}
