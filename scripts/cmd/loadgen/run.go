package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Run makes one run: the private rig if asked, the setup, the load (with
// chaos if asked), the settling, and the verdicts.
func Run(ctx context.Context, cfg Config, log io.Writer) (*Report, error) {
	tag := fmt.Sprintf("%x", rand.Uint32())[:6]
	rep := &Report{Mode: "running programs", Seed: cfg.Seed, Replicas: cfg.Replicas, Rate: cfg.Rate, Concurrency: cfg.Concurrency, Duration: cfg.Duration.Seconds(), Tag: tag}
	if cfg.Rate > 0 {
		rep.Concurrency = 0
	}

	var r *rig
	if cfg.Own {
		rep.Mode = "own rig"
		if cfg.Chaos {
			rep.Mode = "chaos"
		}
		var err error
		if r, err = startRig(ctx, cfg, tag, log); err != nil {
			return nil, err
		}
		keep := true // until the invariants are known to hold
		defer func() { r.close(keep || cfg.KeepDBs) }()
		defer func() { keep = !rep.InvariantsHold }()
		cfg.Targets = r.targets
	}

	dsn, err := mysql.ParseDSN(cfg.Targets.MySQLDSN)
	if err != nil {
		return nil, fmt.Errorf("--mysql: %w", err)
	}
	dsn.ParseTime, dsn.Loc = true, time.UTC
	db, err := sql.Open("mysql", dsn.FormatDSN())
	if err != nil {
		return nil, err
	}
	defer db.Close()
	db.SetMaxOpenConns(4)

	st := newStats()
	c := newClient(cfg.Targets, cfg.Timeout, cfg.RetryFor, st)
	fmt.Fprintf(log, "loadgen: run %s, setting up %d products and 3 coupon templates\n", tag, cfg.Products)
	cat, err := setup(ctx, c, cfg, tag)
	if err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	rep.Catalog = cat
	k := &checker{db: db, t: cfg.Targets, c: c, cat: cat, st: st}

	// What the CPU split and RSS are measured on.
	groups := func() map[string][]int {
		var g map[string][]int
		if r != nil {
			g = r.pids()
		} else {
			g = pidFiles(".run")
			if p := findProcs("nats-server", "4223"); len(p) > 0 {
				g["nats-server"] = p
			}
			if p := findProcs("redis-server", "6380"); len(p) > 0 {
				g["redis-server"] = p
			}
		}
		g["mariadb"] = append(findProcs("mariadbd"), findProcs("mysqld")...)
		g["loadgen"] = []int{os.Getpid()}
		return g
	}
	cpu := &cpuWatch{groups: groups}

	// The load, with its watchers.
	watchCtx, stopWatch := context.WithCancel(context.Background())
	jw := newJobWatch(cfg.Targets, r != nil)
	jobsDone := make(chan struct{})
	go func() { jw.run(watchCtx); close(jobsDone) }()
	var ch *chaos
	chaosDone := make(chan struct{})
	chaosCtx, stopChaos := context.WithCancel(ctx)
	if cfg.Chaos {
		ch = newChaos(r, cfg.Seed, cfg.ChaosEvery, log)
		go func() { ch.run(chaosCtx); close(chaosDone) }()
	} else {
		close(chaosDone)
	}
	var paid int
	paidCh := make(chan int, 1)
	go func() {
		for watchCtx.Err() == nil {
			select {
			case paidCh <- k.paidCount(watchCtx):
			default:
			}
			time.Sleep(2 * time.Second)
		}
	}()
	paidNow := func() int {
		select {
		case paid = <-paidCh:
		default:
		}
		return paid
	}
	stopProgress := make(chan struct{})
	progressDone := make(chan struct{})
	began := time.Now()
	if !cfg.Quiet {
		go func() {
			progress(log, isTerminal(log), st, began, cfg.Duration, paidNow, stopProgress)
			close(progressDone)
		}()
	} else {
		close(progressDone)
	}
	p := &purchaser{c: c, cfg: cfg, cat: cat, st: st}
	cpu.start()
	loadCtx, stopLoad := context.WithTimeout(ctx, cfg.Duration)
	profiled := make(chan struct{})
	go func() {
		if cfg.ProfileDir != "" {
			profileServices(loadCtx, cfg.Targets, cfg.Duration, cfg.ProfileDir, log)
		}
		close(profiled)
	}()
	go func() { <-loadCtx.Done(); stopChaos() }()
	started, tail := p.drive(ctx)
	<-profiled
	stopLoad()
	cpu.stop()
	close(stopProgress)
	<-progressDone
	stopChaos()
	<-chaosDone
	if r != nil {
		// Everything the chaos left down comes back before the verdicts;
		// the proxy is disarmed.
		for _, pr := range r.procs {
			if !pr.running() {
				if err := pr.start(ctx, r.dir); err != nil {
					fmt.Fprintf(log, "loadgen: %v\n", err)
				}
			}
		}
		post(r.targets.FaultProxyAdmin+"/disarm", r.targets.AdminToken, "{}")
	}
	fmt.Fprintf(log, "loadgen: load done after %.1fs (%d purchases, the last ones finished %.1fs later); settling up to %s\n",
		cfg.Duration.Seconds(), started, tail.Seconds(), cfg.Settle)

	checks, settled := k.settle(ctx, cfg.Settle)
	stopWatch()
	<-jobsDone
	rep.Settled = settled.Seconds()
	rep.Invariants = checks
	rep.InvariantsHold = true
	for _, c := range checks {
		rep.InvariantsHold = rep.InvariantsHold && c.OK
	}
	rep.Purchases = int(started)
	rep.PurchasesPerSecond = float64(started) / cfg.Duration.Seconds()
	st.mu.Lock()
	rep.Outcomes = maps.Clone(st.outcomes)
	rep.Requests = map[string]RequestStats{}
	for step, ds := range st.latency {
		rep.Requests[step] = RequestStats{Answered: percentiles(ds), Retries: st.retries[step]}
	}
	rep.FailedTries = maps.Clone(st.failures)
	st.mu.Unlock()
	if rep.Flow, err = k.flowLatency(ctx, cfg.Duration); err != nil {
		fmt.Fprintf(log, "loadgen: flow latency: %v\n", err)
	}
	rep.Jobs = jw.counts()
	rep.Usage, rep.Machine = cpu.usage()
	if ch != nil {
		rep.FaultCounts, rep.Faults = ch.summary()
		if r != nil {
			rep.Restarts = map[string]int{}
			for _, pr := range r.procs {
				if pr.starts > 1 {
					rep.Restarts[pr.name] = pr.starts - 1
				}
			}
		}
	}
	if r != nil && !rep.InvariantsHold {
		rep.KeptRig = fmt.Sprintf("logs in %s; databases %s", r.dir, strings.Join([]string{r.targets.OrderDB, r.targets.CouponDB, r.targets.PaymentDB}, ", "))
	}
	return rep, nil
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
