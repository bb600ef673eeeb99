package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/lab/dupproof"
	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
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
BenchmarkCreateOrder/interpolated/with-intx-2	    1000	   1000000 ns/op	      1000 req/s
BenchmarkCreateOrder/interpolated/with-intx-2	    1000	   1000000 ns/op	      1100 req/s
BenchmarkReplay-2   	 5000	  300000 ns/op	  0.4000 p50-ms	   1.200 p99-ms
BenchmarkProductCopy10k-2  3  5711765330 ns/op  6379 broken-products/s  6018 fixed-products/s  0.9434 fixed/broken  1.371 fixed/orderly  4388 orderly-products/s
BenchmarkCallback/fixed-2   2000  100 ns/op  900 callbacks/s  20 p50-ms  80 p99-ms  1.000 records/payment
BenchmarkCallback/broken-2  2000  100 ns/op  1000 callbacks/s  18 p50-ms  70 p99-ms  1.100 records/payment
PASS
ok  	github.com/oncemall/oncemall/pkg/outbox	12.3s
goos: linux
goarch: amd64
pkg: github.com/oncemall/oncemall/services/order/lab
BenchmarkCreateOrderAPI-2   	       5	2423304573 ns/op	      1530 with-req/s	         0.7165 with/without	      2135 without-req/s
BenchmarkCreateOrderAPI-2   	       5	2689057245 ns/op	      1374 with-req/s	         0.6567 with/without	      2093 without-req/s
BenchmarkCreateOrderAPI-2   	       5	2389057245 ns/op	      1600 with-req/s	         0.7300 with/without	      2192 without-req/s
PASS
ok  	github.com/oncemall/oncemall/services/order/lab	48.2s
`

func TestParse(t *testing.T) {
	samples := Parse(strings.NewReader(output))
	if len(samples) != 16 {
		for _, s := range samples {
			t.Log(s.Line)
		}
		t.Fatalf("%d samples, want 16", len(samples))
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
		{"BenchmarkCreateOrder/interpolated/with-intx", "req/s", 1050}, // a hyphen in the name, then -GOMAXPROCS
		{"BenchmarkCreateOrderAPI", "with/without", 0.7165},            // median of three runs
		{"BenchmarkCreateOrderAPI", "without-req/s", 2135},
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
		"throughput ≥ 20,000 events/s (1 relay instance(s), 100,000 rows)":                                         "not met 19,000 events/s",
		"throughput ≥ 20,000 events/s (3 relay instance(s), 100,000 rows)":                                         "met 25,000 events/s",
		"commit→publish p99 ≤ 50 ms at 1,000 orders/s":                                                             "met 12.5 ms",
		"POST /orders with the guard ≥ 70% of without (BenchmarkCreateOrderAPI, median of the runs' with/without)": "met 72%",         // the median run; the mean, 70.1%, would be judged on the slow one too
		"test handler, Handler ÷ without (BenchmarkCreateOrder/interpolated/with)":                                 "figure only 77%", // 850/1100
		"test handler, HandlerInTx ÷ without (BenchmarkCreateOrder/interpolated/with-intx)":                        "figure only 95%", // 1050/1100
		"test handler, Handler ÷ without (BenchmarkCreateOrder/prepared/with)":                                     "not measured –",
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

	orderAPI, err := selectSuites("orderapi")
	if err != nil {
		t.Fatal(err)
	}
	samples := Parse(strings.NewReader(output))
	apiSamples := slices.DeleteFunc(slices.Clone(samples), func(s Sample) bool { return s.Name != "BenchmarkCreateOrderAPI" })
	var md bytes.Buffer
	rep := Report{Checks: checks, Dup: dup, Machine: Machine{CPUs: 2, LoadStart: "9.5 9 9"}, Invocation: "make bench",
		Outcomes: []Outcome{{Suite: suites[0], Samples: samples}, {Suite: orderAPI[0], Samples: apiSamples}}}
	if err := rep.Write(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| outbox relay | throughput ≥ 20,000 events/s (1 relay instance(s), 100,000 rows) | 19,000 events/s | **not met** |",
		"The machine was busy", "(cd pkg && go test -run '^$' -bench '.' -benchtime 1x -count 2 ./outbox/)",
		"(cd services/order && go test -run '^$' -bench '^BenchmarkCreateOrderAPI$' -benchtime 5x -count 3 ./lab)",
		"| Idempotency-Key | POST /orders with the guard ≥ 70% of without (BenchmarkCreateOrderAPI, median of the runs' with/without) | 72% | **met** |",
		"| BenchmarkCreateOrderAPI | 1,530 (1,374–1,600) |",
		"| 850 (800–900) |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, md.String())
		}
	}
}

// TestSuitesSelectDisjointBenchmarks reads the benchmark functions of every
// suite's package and fails when a suite selects none, or when two suites
// of one package (orderapi and products share services/order/lab) would
// both run one benchmark: its figures would be measured twice and a suite's
// run would take another's time.
func TestSuitesSelectDisjointBenchmarks(t *testing.T) {
	root := composecheck.RepoRoot(t)
	benchFunc := regexp.MustCompile(`(?m)^func (Benchmark\w*)\(b \*testing\.B\)`)
	selectedBy := map[string][]string{} // package dir + benchmark → suites
	for _, s := range suites {
		if s.LoadGen {
			continue // runs of the load generator, no benchmark functions
		}
		dir := filepath.Join(root, s.Dir, s.Pkg)
		files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
		if err != nil || len(files) == 0 {
			t.Logf("%s: no test files in %s (not merged yet?)", s.Name, dir)
			continue
		}
		// go test matches the first level of a benchmark's name against the
		// pattern's first slash-separated element.
		pattern := regexp.MustCompile(strings.Split(s.Bench, "/")[0])
		n := 0
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range benchFunc.FindAllSubmatch(src, -1) {
				if name := string(m[1]); pattern.MatchString(name) {
					// A suite on another NATS server names its
					// results apart (Suite.Variant).
					key := dir + " " + name + s.Variant()
					selectedBy[key] = append(selectedBy[key], s.Name)
					n++
				}
			}
		}
		if n == 0 {
			t.Errorf("suite %s: -bench %q selects no benchmark in %s", s.Name, s.Bench, dir)
		}
	}
	for bench, names := range selectedBy {
		if len(names) > 1 {
			t.Errorf("%s is run by suites %v", bench, names)
		}
	}
	if got := selectedBy[filepath.Join(root, "services/order", "./lab")+" BenchmarkCreateOrderAPI"]; !slices.Equal(got, []string{"orderapi"}) {
		t.Errorf("BenchmarkCreateOrderAPI is run by %v, want orderapi alone", got)
	}
}

// TestOutboxRunsOnTheDeployNATS: the outbox suite also runs against the
// NATS version compose pins, with JetStream's defaults and with
// deploy/nats.conf's settings, through natsrun, and those figures stand
// apart from the default server's, which the targets are judged on.
func TestOutboxRunsOnTheDeployNATS(t *testing.T) {
	root := composecheck.RepoRoot(t)
	mod, err := os.ReadFile(filepath.Join(root, "scripts", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mod), "github.com/nats-io/nats-server/v2 v"+pinnedNATS+"\n") {
		t.Errorf("pinnedNATS is %s, not the nats-server version of scripts/go.mod", pinnedNATS)
	}
	compose, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(compose), "image: nats:"+pinnedNATS+"\n") {
		t.Errorf("docker-compose.yml does not run nats:%s", pinnedNATS)
	}
	sync, err := selectSuites("outbox-sync")
	if err != nil {
		t.Fatal(err)
	}
	want := "(cd pkg && go run ../scripts/tools/natsrun -jetstream-from ../deploy/nats.conf -- go test -run '^$' -bench 'RelayThroughput|CommitToPublishLatency' -benchtime 1x -count 1 ./outbox/)"
	if got := sync[0].Command(); got != want {
		t.Errorf("outbox-sync runs\n%s\nwant\n%s", got, want)
	}
	f := Summarise([]Sample{
		{Name: "BenchmarkCommitToPublishLatency", Metrics: map[string]float64{"p99-ms": 2}},
		{Name: "BenchmarkCommitToPublishLatency" + sync[0].Variant(), Metrics: map[string]float64{"p99-ms": 90}},
	})
	if v, _ := f.Get("BenchmarkCommitToPublishLatency", "p99-ms"); v != 2 {
		t.Errorf("the default server's p99 is pooled with the deploy server's: %v", v)
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
