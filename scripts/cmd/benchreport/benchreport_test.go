package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/dupproof"
)

// output is go test -bench output as it comes: a plain line, a line whose
// results follow a log line, -count repeats, and noise.
const output = `goos: linux
goarch: amd64
pkg: github.com/oncemall/oncemall/pkg/outbox
cpu: Intel(R) Xeon(R) Processor
BenchmarkRelayThroughput/relays=1-2         	       1	5123456789 ns/op	     19000 events/s
BenchmarkRelayThroughput/relays=3-2         	       1	4123456789 ns/op	     25000.5 events/s
BenchmarkCommitToPublishLatency-2
    bench_test.go:210: some log line
       1	5000000000 ns/op	        41.00 max-ms	         3.000 p50-ms	        12.50 p99-ms
BenchmarkCreateOrder/interpolated/without-2 	    1000	   1000000 ns/op	      1000 req/s
BenchmarkCreateOrder/interpolated/without-2 	    1000	   1000000 ns/op	      1200 req/s
BenchmarkCreateOrder/interpolated/with-2    	    1000	   1000000 ns/op	       800 req/s
BenchmarkCreateOrder/interpolated/with-2    	    1000	   1000000 ns/op	       900 req/s
BenchmarkReplay-2   	 5000	  300000 ns/op	  0.4000 p50-ms	   1.200 p99-ms
BenchmarkProductCopy10k-2  3  5711765330 ns/op  6379 broken-products/s  6018 fixed-products/s  0.9434 fixed/broken  1.371 fixed/orderly  4388 orderly-products/s
BenchmarkCallback/fixed-2   2000  100 ns/op  900 callbacks/s  20 p50-ms  80 p99-ms  1.000 records/payment
BenchmarkCallback/broken-2  2000  100 ns/op  1000 callbacks/s  18 p50-ms  70 p99-ms  1.100 records/payment
PASS
ok  	github.com/oncemall/oncemall/pkg/outbox	12.3s
`

func TestParse(t *testing.T) {
	samples := Parse(strings.NewReader(output))
	if len(samples) != 11 {
		for _, s := range samples {
			t.Log(s.Line)
		}
		t.Fatalf("%d samples, want 11", len(samples))
	}
	f := Summarise(samples)
	for _, tt := range []struct {
		name, unit string
		want       float64
	}{
		{"BenchmarkRelayThroughput/relays=3", "events/s", 25000.5},
		{"BenchmarkCommitToPublishLatency", "p99-ms", 12.5},          // results after a log line
		{"BenchmarkCreateOrder/interpolated/without", "req/s", 1100}, // median of two runs
		{"BenchmarkProductCopy10k", "fixed/orderly", 1.371},
	} {
		if got, ok := f.Get(tt.name, tt.unit); !ok || got != tt.want {
			t.Errorf("%s %s = %v (%v), want %v", tt.name, tt.unit, got, ok, tt.want)
		}
	}
	if s := f["BenchmarkCreateOrder/interpolated/with"]["req/s"]; s.Runs != 2 || s.Min != 800 || s.Max != 900 {
		t.Errorf("with: %+v", s)
	}
}

func TestEvaluate(t *testing.T) {
	dup := []dupproof.Row{
		{Guard: dupproof.CheckThenSet, Goroutines: 100, Allow: 1, Passed: 40, Want: 1},
		{Guard: dupproof.SetNX, Goroutines: 100, Allow: 1, Passed: 1, Want: 1, Holds: true},
		{Guard: dupproof.SlidingWindow, Goroutines: 200, Allow: 5, Passed: 6, Want: 5},
	}
	checks := Evaluate(Summarise(Parse(strings.NewReader(output))), dup)
	got := map[string]string{}
	for _, c := range checks {
		got[c.Target] = c.Status + " " + c.Value
	}
	for target, want := range map[string]string{
		"throughput ≥ 20,000 events/s (1 relay instance(s), 100,000 rows)":                   "not met 19,000 events/s",
		"throughput ≥ 20,000 events/s (3 relay instance(s), 100,000 rows)":                   "met 25,000 events/s",
		"commit→publish p99 ≤ 50 ms at 1,000 orders/s":                                       "met 12.5 ms",
		"with middleware ≥ 70% of without (POST /orders, BenchmarkCreateOrder/interpolated)": "met 77%", // 850/1100
		"with middleware ≥ 70% of without (POST /orders, BenchmarkCreateOrder/prepared)":     "not measured –",
		"replay p50 ≤ 2 ms":                                                              "met 0.40 ms",
		"fixed (16 workers) ≥ 3× orderly":                                                "not met 1.37×",
		"fixed ≥ 50% of broken":                                                          "met 94%",
		"fixed: 1 record per payment under 10% duplicates":                               "met 1.000",
		"throughput fixed vs broken (concurrency 50, 10% duplicates)":                    "figure only 90%",
		"p99 latency, broken":                                                            "figure only 70.0 ms",
		"check-then-set (EXISTS, then SET) lets more than 1 of 100 through (reproduces)": "met 40 passed",
		"SET NX EX (atomic placeholder) lets exactly 1 of 100 through":                   "met 1 passed",
		"sliding window (Lua over a ZSET) lets exactly 5 of 200 through":                 "not met 6 passed",
	} {
		if got[target] != want {
			t.Errorf("%s: %q, want %q", target, got[target], want)
		}
	}

	var md bytes.Buffer
	rep := Report{Checks: checks, Dup: dup, Machine: Machine{CPUs: 2, LoadStart: "9.5 9 9"}, Invocation: "make bench",
		Outcomes: []Outcome{{Suite: suites[0], Samples: Parse(strings.NewReader(output))}}}
	if err := rep.Write(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| outbox relay | throughput ≥ 20,000 events/s (1 relay instance(s), 100,000 rows) | 19,000 events/s | **not met** |",
		"The machine was busy", "(cd pkg && go test -run '^$' -bench '.' -benchtime 1x -count 2 ./outbox/)",
		"| 850 (800–900) |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, md.String())
		}
	}
}

func TestSelectSuites(t *testing.T) {
	if s, err := selectSuites("outbox, products"); err != nil || len(s) != 2 || s[1].Name != "products" {
		t.Fatalf("%v %+v", err, s)
	}
	if _, err := selectSuites("nope"); err == nil {
		t.Fatal("unknown suite accepted")
	}
}
