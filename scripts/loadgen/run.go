package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/oncemall/oncemall/pkg/auth"
)

// Run makes one run: the private rig if asked, the setup, the idle
// window, the load phase after phase (with chaos or a phase's outage if
// asked), the settling, and the verdicts.
func Run(ctx context.Context, cfg Config, log io.Writer) (*Report, error) {
	signer, err := auth.DevSigner()
	if err != nil {
		return nil, err
	}
	tag := fmt.Sprintf("%x", rand.Uint32())[:6]
	if len(cfg.Phases) == 0 {
		cfg.Phases = []Phase{{Rate: cfg.Rate, Duration: cfg.Duration}}
	}
	tl := newTimeline(cfg.Phases)
	rep := &Report{Mode: "running programs", Seed: cfg.Seed, Replicas: cfg.Replicas, Rate: cfg.Rate, Concurrency: cfg.Concurrency, Duration: tl.total.Seconds(), Tag: tag}
	if cfg.Rate > 0 {
		rep.Concurrency = 0
	}
	rep.RetryPolicy = fmt.Sprintf("after Retry-After + up to 50%% jitter, else a jittered backoff; retries within a budget of %.0f%% of first tries (+%d a second, %d saved); each request for up to %s",
		100*cfg.RetryBudget, budgetFloor, budgetBurst, cfg.RetryFor)
	if cfg.RetryAtOnce {
		rep.RetryPolicy = fmt.Sprintf("at once, Retry-After ignored, no budget; each request for up to %s", cfg.RetryFor)
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
	rep.ProxyInPath = map[int]string{proxyNone: "none", proxyCoupon: "coupon's database", proxyAll: "every service's database"}[cfg.proxied()]
	if r == nil {
		rep.ProxyInPath = "as make run runs it"
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
	c.atOnce = cfg.RetryAtOnce
	c.budget = newRetryBudget(cfg.RetryBudget, budgetFloor, budgetBurst, time.Now)
	fmt.Fprintf(log, "loadgen: run %s, setting up %d products and 3 coupon templates\n", tag, cfg.Products)
	cat, err := setup(ctx, c, cfg, tag)
	if err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	rep.Catalog = cat
	k := &checker{db: db, t: cfg.Targets, c: c, cat: cat, st: st}

	// What the CPU split and RSS are measured on. Of the MySQL servers on
	// the machine, the one listening on the run's port (all of them when
	// that cannot be told).
	var mysqlServer []int
	if _, port, err := net.SplitHostPort(dsn.Addr); err == nil {
		if n, err := strconv.Atoi(port); err == nil {
			mysqlServer = listening(append(findProcs("mariadbd"), findProcs("mysqld")...), n)
		}
	}
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
		g["mariadb"] = mysqlServer
		if len(mysqlServer) == 0 {
			g["mariadb"] = append(findProcs("mariadbd"), findProcs("mysqld")...)
		}
		g["loadgen"] = []int{os.Getpid()}
		return g
	}
	services := map[string][]string{"order": cfg.Targets.Order, "coupon": cfg.Targets.Coupon, "payment": cfg.Targets.Payment}
	m := &meter{groups: groups, db: db, natsMon: cfg.Targets.NATSMonitor, services: services, http: &http.Client{Timeout: 3 * time.Second}, st: st}
	if cfg.Targets.RedisAddr != "" {
		m.rdb = redis.NewClient(&redis.Options{Addr: cfg.Targets.RedisAddr, Password: cfg.Targets.RedisPass, DialTimeout: time.Second, ReadTimeout: 2 * time.Second, MaxRetries: -1})
		defer m.rdb.Close()
	}

	// The watchers run from before the idle window, so that what they cost
	// the programs is idle too, and subtracted.
	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	jobsCtx, stopJobs := context.WithCancel(context.Background())
	defer stopJobs()
	jw := newJobWatch(cfg.Targets, r != nil)
	jobsDone := make(chan struct{})
	go func() { jw.run(jobsCtx); close(jobsDone) }()
	w := newWatcher(groups, services, tl)
	watchDone := make(chan struct{})
	go func() { w.run(watchCtx); close(watchDone) }()
	var paid int
	paidCh := make(chan int, 1)
	if !cfg.Quiet {
		go func() {
			for watchCtx.Err() == nil {
				select {
				case paidCh <- k.paidCount(watchCtx):
				default:
				}
				time.Sleep(2 * time.Second)
			}
		}()
	}
	paidNow := func() int {
		select {
		case paid = <-paidCh:
		default:
		}
		return paid
	}

	// The idle window.
	fmt.Fprintf(log, "loadgen: measuring the programs idle for %s\n", cfg.Idle)
	idleFrom := m.read(ctx)
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(cfg.Idle):
	}
	idle := between(idleFrom, m.read(ctx))

	// The load.
	var ch *chaos
	chaosDone := make(chan struct{})
	chaosCtx, stopChaos := context.WithCancel(ctx)
	if cfg.Chaos {
		ch = newChaos(r, cfg.Seed, cfg.ChaosEvery, log)
		go func() { ch.run(chaosCtx); close(chaosDone) }()
	} else {
		close(chaosDone)
	}
	stopProgress := make(chan struct{})
	progressDone := make(chan struct{})
	first := m.read(ctx)
	began := time.Now()
	w.start(began)
	if !cfg.Quiet {
		go func() {
			progress(log, isTerminal(log), st, began, tl.total, paidNow, stopProgress)
			close(progressDone)
		}()
	} else {
		close(progressDone)
	}
	loadCtx, stopLoad := context.WithTimeout(ctx, tl.total)
	profiled := make(chan struct{})
	go func() {
		if cfg.ProfileDir != "" {
			profileServices(loadCtx, cfg.Targets, tl.total, cfg.ProfileDir, log)
		}
		close(profiled)
	}()
	go func() { <-loadCtx.Done(); stopChaos() }()
	outages := &outageLog{began: began, log: log}
	readingsCh := make(chan []reading, 1)
	go func() { readingsCh <- outages.boundaries(ctx, tl, m, r, first) }()
	p := &purchaser{c: c, cfg: cfg, cat: cat, st: st, signer: signer}
	started, tail := p.drive(ctx, tl, began)
	readings := <-readingsCh
	<-profiled
	stopLoad()
	close(stopProgress)
	<-progressDone
	stopChaos()
	<-chaosDone
	stopWatch()
	<-watchDone
	if r != nil {
		// Everything the chaos left down comes back before the verdicts;
		// the proxy is disarmed and healed.
		for _, pr := range r.procs {
			if !pr.running() {
				if err := pr.start(ctx, r.dir); err != nil {
					fmt.Fprintf(log, "loadgen: %v\n", err)
				}
			}
		}
		if r.targets.FaultProxyAdmin != "" {
			post(r.targets.FaultProxyAdmin+"/disarm", r.targets.AdminToken, "{}")
			if err := r.healDB(); err != nil {
				fmt.Fprintf(log, "loadgen: %v\n", err)
			}
		}
	}
	fmt.Fprintf(log, "loadgen: load done after %.1fs (%d purchases, the last ones finished %.1fs later); settling up to %s\n",
		tl.total.Seconds(), started, tail.Seconds(), cfg.Settle)
	rssAfter := map[string][]float64{}
	for g, pids := range groups() {
		for _, pid := range pids {
			rssAfter[g] = append(rssAfter[g], float64(int(rssOf(pid)*10))/10)
		}
	}

	checks, settled := k.settle(ctx, cfg.Settle)
	stopJobs()
	<-jobsDone
	rep.Settled = settled.Seconds()
	rep.Invariants = checks
	rep.InvariantsHold = true
	for _, c := range checks {
		rep.InvariantsHold = rep.InvariantsHold && c.OK
	}
	rep.Purchases = int(started)
	rep.PurchasesPerSecond = float64(started) / tl.total.Seconds()
	st.mu.Lock()
	rep.Outcomes = maps.Clone(st.outcomes)
	rep.Requests = requestStats(st.tries, st.retries)
	rep.FailedTries = maps.Clone(st.failures)
	rep.RefusedTries = maps.Clone(st.refusals)
	st.mu.Unlock()
	rep.RetriesDenied = c.budget.deniedRetries()
	rows, err := k.orders(ctx)
	if err != nil {
		fmt.Fprintf(log, "loadgen: flow latency: %v\n", err)
	}
	end := began.Add(tl.total)
	rep.Flow = flowOf(rows, began, end)
	if len(readings) == len(tl.phases)+1 {
		rep.Cost = newCost(between(readings[0], readings[len(readings)-1]), idle, rep.Flow.CompletedInWindow, rssAfter)
	} else {
		fmt.Fprintf(log, "loadgen: the load was cut short; no cost report\n")
	}
	rep.Phases = phaseReports(phaseInput{tl: tl, began: began, rows: rows, userBase: cat.UserBase, st: st, w: w, readings: readings, idle: idle})
	rep.Jobs = jw.counts()
	rep.Faults = outages.faults()
	if ch != nil {
		var chaosFaults []Fault
		rep.FaultCounts, chaosFaults = ch.summary()
		rep.Faults = append(rep.Faults, chaosFaults...)
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

// The customers' retry budget besides its ratio: a floor of tokens a
// second, so that a quiet client can retry at all, and the most it saves.
const (
	budgetFloor = 5
	budgetBurst = 50
)

// sleepUntil waits for t; false when ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(time.Until(t)):
		return true
	}
}

// outageLog begins and heals the phases' faults on the rig and records
// them.
type outageLog struct {
	began time.Time
	log   io.Writer
	mu    sync.Mutex
	list  []Fault
}

func (o *outageLog) record(kind, format string, args ...any) {
	f := Fault{At: time.Since(o.began).Round(100 * time.Millisecond).Seconds(), Kind: kind, What: fmt.Sprintf(format, args...)}
	o.mu.Lock()
	o.list = append(o.list, f)
	o.mu.Unlock()
	fmt.Fprintf(o.log, "\nphase %6.1fs  %-12s %s\n", f.At, kind, f.What)
}

func (o *outageLog) begin(r *rig, fault string) {
	switch fault {
	case faultDBCut, faultDBBlackhole:
		outage := map[string]string{faultDBCut: "refuse", faultDBBlackhole: "blackhole"}[fault]
		if err := r.cutDB(outage); err != nil {
			o.record(fault, "failed: %v", err)
			return
		}
		o.record(fault, "every service's database cut at the fault proxy (%s)", outage)
	case faultNATSDown:
		r.byName["nats-server"].stop()
		o.record(fault, "nats-server stopped (SIGTERM)")
	}
}

func (o *outageLog) heal(ctx context.Context, r *rig, fault string) {
	switch fault {
	case faultDBCut, faultDBBlackhole:
		if err := r.healDB(); err != nil {
			o.record("heal", "failed: %v", err)
			return
		}
		o.record("heal", "the databases reachable again")
	case faultNATSDown:
		began := time.Now()
		if err := r.byName["nats-server"].start(ctx, r.dir); err != nil {
			o.record("heal", "nats-server did not start again: %v", err)
			return
		}
		o.record("heal", "nats-server started again on its store, ready in %.1fs", time.Since(began).Seconds())
	}
}

// boundaries walks the phases' boundaries from o.began: at each it heals
// the fault of the phase that ends, begins the next one's, and takes a
// reading (beside them: a reading takes a moment, the faults change at the
// boundary itself). It returns first and the readings, one per boundary
// reached and one at the load's end.
func (o *outageLog) boundaries(ctx context.Context, tl timeline, m *meter, r *rig, first reading) []reading {
	readings := []reading{first}
	readAsync := func() <-chan reading {
		done := make(chan reading, 1)
		go func() { done <- m.read(ctx) }()
		return done
	}
	last := len(tl.phases) - 1
	o.begin(r, tl.phases[0].Fault)
	for k := 1; k <= last+1; k++ {
		at := tl.total
		if k <= last {
			at = tl.starts[k]
		}
		if !sleepUntil(ctx, o.began.Add(at)) {
			o.heal(ctx, r, tl.phases[k-1].Fault)
			return readings
		}
		rd := readAsync()
		o.heal(ctx, r, tl.phases[k-1].Fault)
		if k <= last {
			o.begin(r, tl.phases[k].Fault)
		}
		readings = append(readings, <-rd)
	}
	return readings
}

func (o *outageLog) faults() []Fault {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.list)
}

// requestStats summarises the tries by step: the latency of the answers
// kept, of the refusals, and the retries.
func requestStats(tries []tryRec, retries map[string]int) map[string]RequestStats {
	answered, refused := map[string][]time.Duration{}, map[string][]time.Duration{}
	for _, t := range tries {
		switch t.class {
		case tryAnswered:
			answered[t.step] = append(answered[t.step], t.took)
		case tryRefused:
			refused[t.step] = append(refused[t.step], t.took)
		}
	}
	out := map[string]RequestStats{}
	for _, step := range slices.Sorted(maps.Keys(answered)) {
		out[step] = RequestStats{Answered: percentiles(answered[step]), Refused: percentiles(refused[step]), Retries: retries[step]}
	}
	for step, ds := range refused {
		if _, ok := out[step]; !ok {
			out[step] = RequestStats{Refused: percentiles(ds), Retries: retries[step]}
		}
	}
	return out
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
