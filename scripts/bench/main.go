// Command bench runs the project's benchmark suites and writes
// docs/benchmarks.md: the figures, the machine they were measured on, the
// exact commands, and every performance target of the issues judged met or
// not met from the figures. `make bench` runs it.
//
// Every number in the report is parsed from `go test -bench` output (the
// b.ReportMetric values) or measured in process (the dupproof table); none
// is typed by hand.
//
// Usage:
//
//	bench [--out docs/benchmarks.md] [--only outbox,idempotency,...] [--note "..."] [--list]
//
// It needs the local MariaDB/MySQL, NATS and Redis (MYSQL_ADDR, NATS_URL,
// REDIS_ADDR as everywhere). It exits 1 when a suite fails to run; a target
// that is not met is reported, not an error.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// Suite is one `go test -bench` invocation.
type Suite struct {
	Name      string // short name for --only
	Title     string
	Dir       string // module directory, relative to the repository root
	Pkg       string
	Bench     string // -bench pattern
	Benchtime string
	Count     int
	Doc       string // the area's own benchmark page, with the discussion
	About     string
	// Needs is a file the suite needs (relative to the root); without it
	// (a service not merged yet) the suite is reported as not run.
	Needs string
	// NATS is the server the suite runs against: "" for NATS_URL's, as
	// everywhere; NATSPinned or NATSDeploy for one of scripts/tools/natsrun,
	// the version compose runs, with JetStream's defaults or with the
	// JetStream settings of deploy/nats.conf (sync_interval: always). Its
	// results are named with the server (see Variant), so they stand
	// beside the default suite's instead of being pooled with them.
	NATS string
	// LoadGen marks the e2e suite: runs of the load generator on its
	// private rig (runE2E), not a go test -bench invocation.
	LoadGen bool
}

// The servers of Suite.NATS.
const (
	NATSPinned = "pinned"
	NATSDeploy = "deploy"
)

// Variant is what the suite's benchmark names carry after them: empty for
// the default server.
func (s Suite) Variant() string {
	switch s.NATS {
	case NATSPinned:
		return " [NATS " + pinnedNATS + ", JetStream defaults]"
	case NATSDeploy:
		return " [NATS " + pinnedNATS + ", deploy/nats.conf: sync_interval always]"
	}
	return ""
}

// pinnedNATS is the nats-server version natsrun runs: scripts/go.mod's,
// the image tag of docker-compose.yml (TestPinnedNATSIsComposes).
const pinnedNATS = "2.15.2"

// suites are run in this order. The benchtimes are chosen for stable
// figures with the whole run under ten minutes on two cores, plus the
// outbox-sync suite, whose speed is the disk's fsync rate (about five
// minutes with this machine's 2 ms fsyncs). Two suites
// share services/order/lab, so their patterns are anchored: each selects
// its own benchmark only (TestSuitesSelectDisjointBenchmarks).
var suites = []Suite{
	{
		Name: "outbox", Title: "Outbox relay (pkg/outbox)", Dir: "pkg", Pkg: "./outbox/", Bench: ".", Benchtime: "1x", Count: 2,
		Doc:   "docs/benchmarks/outbox.md",
		About: "Raw JetStream async publish (the ceiling); relay throughput, committed rows → PubAck → marked sent, for 100,000 rows with 1 and 3 relays; commit→publish latency while committing 1,000 orders/s for 5 s; publish on commit (Send) against the claim path at 200 events/s and unpaced, with the relay's SQL statements and commits per event.",
	},
	{
		Name: "outbox-nats", Title: "Outbox relay on the NATS version compose runs, JetStream defaults", Dir: "pkg", Pkg: "./outbox/", Bench: ".", Benchtime: "1x", Count: 2,
		NATS:  NATSPinned,
		Doc:   "docs/benchmarks/outbox.md",
		About: "The outbox suite against a nats-server of the version docker-compose.yml pins, started in process by scripts/tools/natsrun with JetStream's defaults (a sync every two minutes): the baseline for the next suite.",
	},
	{
		// One run, and not the raw-publish ceiling: it waits one minute
		// for 100,000 PubAcks, which an fsync per write cannot give.
		Name: "outbox-sync", Title: "Outbox relay on NATS with deploy/nats.conf's JetStream settings (sync_interval: always)", Dir: "pkg", Pkg: "./outbox/", Bench: "RelayThroughput|CommitToPublishLatency", Benchtime: "1x", Count: 1,
		NATS:  NATSDeploy,
		Doc:   "docs/benchmarks/outbox.md",
		About: "The relay and latency benchmarks against the same server with the JetStream settings of deploy/nats.conf, as compose runs it: every write fsynced before its PubAck. The difference from outbox-nats is what that durability costs the relay.",
	},
	{
		Name: "idempotency", Title: "Idempotency-Key middleware (pkg/idempotency)", Dir: "pkg", Pkg: "./idempotency/", Bench: ".", Benchtime: "2s", Count: 3,
		Doc:   "docs/benchmarks/idempotency.md",
		About: "The package's order-writing test handler without the middleware, with Handler (claim committed before the handler) and with HandlerInTx (claim inserted in the handler's transaction), a fresh key per request, 16 requests in flight per core, with the driver preparing statements and with client-side interpolation; the replay path's latency. A floor for the middleware's cost: the throughput target is judged on the real POST /orders (orderapi).",
	},
	{
		Name: "orderapi", Title: "POST /orders with and without the Idempotency-Key guard (services/order/lab, incident 4)", Dir: "services/order", Pkg: "./lab", Bench: "^BenchmarkCreateOrderAPI$", Benchtime: "5x", Count: 3,
		Doc:   "docs/benchmarks/idempotency.md",
		About: "The order service's real POST /orders, wired as cmd/order wires it (the platform's gin stack, the form-token check, the order and its stock reservation in one transaction) and served in process with 32 requests in flight: without the Idempotency-Key guard, and with HandlerInTx and a fresh key per request. The Idempotency-Key throughput target is judged on this pair.",
	},
	{
		Name: "purchase", Title: "Purchase order placement and the hot product (scripts/tests/lab, incident 5)", Dir: "scripts", Pkg: "./tests/lab", Bench: "^(BenchmarkPurchaseOrder|BenchmarkHotProductStock)$", Benchtime: "3x", Count: 3,
		Doc:   "docs/benchmarks/purchase.md",
		About: "The real POST /orders with the Idempotency-Key guard, 32 in flight, served in process: two items each, plain (no coupon: catalog prices and stock in the order's transaction) beside purchase (the coupon locked at the real coupon service, served in process on its own database, over loopback HTTP before the transaction, the prices re-checked in it), 2,000 requests each per round; and 100 concurrent orders of one hot product in each stock mode (fixed, broken, optimistic), with a spread case (one product per client) for what the hot row costs.",
	},
	{
		Name: "tracing", Title: "POST /orders with tracing off and on (services/order/lab, issue 16)", Dir: "services/order", Pkg: "./lab", Bench: "^BenchmarkCreateOrderTracing$", Benchtime: "3x", Count: 5,
		Doc:   "docs/observability.md",
		About: "The order service's real POST /orders with the Idempotency-Key guard, 32 in flight, served in process: tracing off (no exporter), then on, every trace exported over OTLP/HTTP to a receiver that discards it; throughput of each and on/off.",
	},
	{
		Name: "products", Title: "Batch product copy (services/order/lab, incident 3)", Dir: "services/order", Pkg: "./lab", Bench: "^BenchmarkProductCopy10k$", Benchtime: "3x", Count: 1,
		Doc:   "docs/benchmarks/products.md",
		About: "10,000 products copied by one batch-copy request in each mode, interleaved: fixed (16 workers), orderly (1 worker), broken (16 workers), fixed with 4 workers.",
	},
	{
		Name: "coupon", Title: "Coupon deduction (services/coupon, incident 1)", Dir: "services/coupon", Pkg: "./internal/app/", Bench: ".", Benchtime: "1000x", Count: 1,
		Doc:   "docs/benchmarks/coupon.md",
		About: "Fixed deduction pipeline per order.paid message, and a retry of an already-deducted message (absorbed by the state machine).",
	},
	{
		Name: "payment", Title: "Payment callback (services/payment, incident 2)", Dir: "services/payment", Pkg: "./internal/httpapi", Bench: "BenchmarkCallback", Benchtime: "2000x", Count: 1,
		Needs: "services/payment/internal/httpapi/bench_test.go",
		Doc:   "docs/benchmarks/payments.md",
		About: "POST /payments/callback through the full HTTP stack, concurrency 50, 10% duplicate notifications, fixed and broken handlers.",
	},
	{
		Name: "e2e", Title: "Whole purchases through every service (scripts/loadgen, issue 21)", Dir: ".", Pkg: "./scripts/loadgen", LoadGen: true,
		Needs: "scripts/loadgen",
		Doc:   "docs/benchmarks/e2e.md",
		About: "The load generator on its private rig (its own NATS, Redis, simulator and one replica of each service on fresh databases), every process's CPU read from /proc and the servers' counters, idle subtracted: the cost per purchase at 100/s, the capacity stepped up, twice the capacity with well-made clients and with clients that retry at once, and 5-minute outages of MySQL and of NATS. About an hour.",
	},
	{
		Name: "faultproxy", Title: "Fault proxy (pkg/lab/faultproxy)", Dir: "pkg", Pkg: "./lab/faultproxy/", Bench: ".", Benchtime: "1s", Count: 1,
		Doc:   "docs/benchmarks/faultproxy.md",
		About: "A round trip and a committed transaction directly against MariaDB and through the disarmed proxy; the protocol scanner.",
	},
}

// Args returns the go test arguments.
func (s Suite) Args() []string {
	return []string{"test", "-run", "^$", "-bench", s.Bench, "-benchtime", s.Benchtime, "-count", fmt.Sprint(s.Count), "-timeout", "20m", s.Pkg}
}

// natsrun returns the go run arguments that put natsrun before a command
// run in the suite's directory, or nil for the default server.
func (s Suite) natsrun() []string {
	if s.NATS == "" {
		return nil
	}
	up := strings.Repeat("../", strings.Count(filepath.ToSlash(filepath.Clean(s.Dir)), "/")+1)
	args := []string{"run", up + "scripts/tools/natsrun"}
	if s.NATS == NATSDeploy {
		args = append(args, "-jetstream-from", up+"deploy/nats.conf")
	}
	return append(args, "--")
}

// Command is the suite as a shell command run from the repository root.
func (s Suite) Command() string {
	if s.LoadGen {
		return "go run ./scripts/bench --only " + s.Name + " # the load generator's runs, listed with the figures"
	}
	wrap := ""
	if r := s.natsrun(); r != nil {
		wrap = "go " + strings.Join(r, " ") + " "
	}
	return fmt.Sprintf("(cd %s && %sgo test -run '^$' -bench '%s' -benchtime %s -count %d %s)", s.Dir, wrap, s.Bench, s.Benchtime, s.Count, s.Pkg)
}

// Outcome is what running a suite gave.
type Outcome struct {
	Suite   Suite
	Samples []Sample
	Seconds float64
	Err     error
	Skipped string // why the suite was not run
	E2E     *E2E   // the e2e suite's runs
}

func run(ctx context.Context, args []string, progress io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	out := fs.String("out", "docs/benchmarks.md", "report to write, relative to the repository root")
	only := fs.String("only", "", "comma-separated suites to run (default all): "+suiteNames())
	note := fs.String("note", "", "a sentence on the run's conditions, printed with the machine")
	list := fs.Bool("list", false, "print the commands and exit")
	e2eFlag := fs.String("e2e", "all", "the e2e suite's parts to run: all, or some of "+strings.Join(e2eParts, ","))
	e2eQuick := fs.Bool("e2e-quick", false, "shorten every e2e duration sixfold to try the suite; nothing is judged")
	if err := fs.Parse(args); err != nil {
		return err
	}
	root, err := composecheck.Root()
	if err != nil {
		return err
	}
	selected, err := selectSuites(*only)
	if err != nil {
		return err
	}
	parts, err := parseE2EParts(*e2eFlag)
	if err != nil {
		return err
	}
	if *list {
		for _, s := range selected {
			fmt.Fprintln(progress, s.Command())
		}
		return nil
	}
	say := func(format string, a ...any) { fmt.Fprintf(progress, "bench: "+format+"\n", a...) }

	started := time.Now().UTC()
	machine := describeMachine(ctx, root)
	say("machine: %d CPUs, %s, load average %s", machine.CPUs, machine.CPUModel, machine.LoadStart)

	var outcomes []Outcome
	var failed []string
	for i, s := range selected {
		needs := s.Dir
		if s.Needs != "" {
			needs = s.Needs
		}
		if _, err := os.Stat(filepath.Join(root, needs)); err != nil {
			outcomes = append(outcomes, Outcome{Suite: s, Skipped: needs + " is not in this checkout yet"})
			say("[%d/%d] %s: skipped (%s missing)", i+1, len(selected), s.Name, needs)
			continue
		}
		say("[%d/%d] %s: %s", i+1, len(selected), s.Name, s.Command())
		var o Outcome
		if s.LoadGen {
			start := time.Now()
			o = Outcome{Suite: s}
			o.E2E, o.Err = runE2E(ctx, root, parts, *e2eQuick, say)
			o.Seconds = time.Since(start).Seconds()
		} else {
			o = runSuite(ctx, root, s, say)
		}
		switch {
		case o.Err != nil:
			failed = append(failed, s.Name)
			say("[%d/%d] %s: FAILED after %.0fs: %v", i+1, len(selected), s.Name, o.Seconds, o.Err)
		case o.E2E != nil:
			say("[%d/%d] %s: %d runs in %.0fs", i+1, len(selected), s.Name, len(o.E2E.Runs), o.Seconds)
		default:
			say("[%d/%d] %s: %d results in %.0fs", i+1, len(selected), s.Name, len(o.Samples), o.Seconds)
		}
		outcomes = append(outcomes, o)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}

	say("dupproof: racing goroutines for one Redis key (check-then-set, SET NX, sliding window)")
	dup, dupErr := runDupproof(ctx)
	if dupErr != nil {
		failed = append(failed, "dupproof")
		say("dupproof: FAILED: %v", dupErr)
	}

	machine.LoadEnd = loadAverage()
	var all []Sample
	var e2e *E2E
	for _, o := range outcomes {
		all = append(all, o.Samples...)
		if o.E2E != nil {
			e2e = o.E2E
		}
	}
	checks := append(Evaluate(Summarise(all), dup), evaluateE2E(e2e)...)
	rep := Report{
		Started: started, Finished: time.Now().UTC(), Machine: machine, Note: *note,
		Outcomes: outcomes, Dup: dup, DupErr: dupErr, Checks: checks,
		Invocation: invocation(*only, *out),
	}
	var buf bytes.Buffer
	if err := rep.Write(&buf); err != nil {
		return err
	}
	path := *out
	if !filepath.IsAbs(path) {
		path = filepath.Join(root, path)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return err
	}
	say("wrote %s in %s", *out, time.Since(started).Round(time.Second))
	for _, c := range checks {
		say("%-20s %-70s %-16s %s", c.Area, c.Target, c.Value, c.Status)
	}
	if len(failed) > 0 {
		return fmt.Errorf("suites failed: %s (see %s)", strings.Join(failed, ", "), *out)
	}
	return nil
}

// runSuite runs one suite, printing a line every 30 s while it runs.
func runSuite(ctx context.Context, root string, s Suite, say func(string, ...any)) Outcome {
	start := time.Now()
	args := s.Args()
	if r := s.natsrun(); r != nil {
		args = append(append(r, goBinary()), args...)
	}
	cmd := exec.CommandContext(ctx, goBinary(), args...)
	cmd.Dir = filepath.Join(root, s.Dir)
	var output bytes.Buffer
	cmd.Stdout = &output
	cmd.Stderr = &output
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		return Outcome{Suite: s, Err: err}
	}
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	var err error
wait:
	for {
		select {
		case err = <-done:
			break wait
		case <-tick.C:
			say("   %s: still running (%s)", s.Name, time.Since(start).Round(time.Second))
		}
	}
	o := Outcome{Suite: s, Samples: Parse(bytes.NewReader(output.Bytes())), Seconds: time.Since(start).Seconds()}
	for i := range o.Samples {
		o.Samples[i].Name += s.Variant()
	}
	if err != nil {
		o.Err = fmt.Errorf("%w: %s", err, tail(output.String(), 15))
	} else if len(o.Samples) == 0 {
		o.Err = errors.New("no benchmark results in the output: " + tail(output.String(), 15))
	}
	return o
}

func selectSuites(only string) ([]Suite, error) {
	if only == "" {
		return suites, nil
	}
	var out []Suite
	for _, name := range strings.Split(only, ",") {
		i := slices.IndexFunc(suites, func(s Suite) bool { return s.Name == strings.TrimSpace(name) })
		if i < 0 {
			return nil, fmt.Errorf("unknown suite %q (have %s)", name, suiteNames())
		}
		out = append(out, suites[i])
	}
	return out, nil
}

func suiteNames() string {
	var names []string
	for _, s := range suites {
		names = append(names, s.Name)
	}
	return strings.Join(names, ",")
}

// goBinary is the go command that runs the suites: $GO as make passes it,
// else go from PATH.
func goBinary() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}

// invocation is how the page says it was written: make bench, or the
// subset that was run.
func invocation(only, out string) string {
	s := "make bench"
	if only != "" {
		s = "go run ./scripts/bench --only " + only
		if out != "docs/benchmarks.md" {
			s += " --out " + out
		}
	}
	return s
}

func tail(s string, lines int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}
