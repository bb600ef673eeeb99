package platform_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/redislock"
	"github.com/oncemall/oncemall/pkg/testkit/spantest"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// replicas returns n schedulers sharing one Redis lock prefix, as n
// replicas of a service do, each with its own metrics registry.
func replicas(t *testing.T, rdb *redis.Client, prefix string, n int) ([]*platform.Scheduler, []*prometheus.Registry) {
	t.Helper()
	var out []*platform.Scheduler
	var regs []*prometheus.Registry
	for range n {
		reg := prometheus.NewRegistry()
		s, err := platform.NewScheduler(redislock.New(rdb, prefix), 5*time.Second, testenv.Logger(t), reg, nil)
		testenv.Must(t, err)
		out, regs = append(out, s), append(regs, reg)
	}
	return out, regs
}

// TestJobRunsOnOneReplicaAtATime races three replicas' runs of one job,
// round after round: in each round exactly one runs it and the others skip
// it as locked.
func TestJobRunsOnOneReplicaAtATime(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	scheds, _ := replicas(t, rdb, prefix, 3)
	var runs, inside, overlaps atomic.Int32
	job := platform.Job{Name: "one-at-a-time", Schedule: "@every 1h", Run: func(context.Context) error {
		if inside.Add(1) > 1 {
			overlaps.Add(1)
		}
		runs.Add(1)
		time.Sleep(30 * time.Millisecond)
		inside.Add(-1)
		return nil
	}}
	const rounds = 20
	for round := range rounds {
		var wg sync.WaitGroup
		outcomes := make([]string, len(scheds))
		start := make(chan struct{})
		for i, s := range scheds {
			wg.Add(1)
			go func() { defer wg.Done(); <-start; outcomes[i] = s.RunOnce(context.Background(), job) }()
		}
		close(start)
		wg.Wait()
		ok, locked := 0, 0
		for _, o := range outcomes {
			switch o {
			case platform.JobOK:
				ok++
			case platform.JobLocked:
				locked++
			}
		}
		if ok != 1 || locked != 2 {
			t.Fatalf("round %d: outcomes %v, want one %s and two %s", round, outcomes, platform.JobOK, platform.JobLocked)
		}
	}
	if runs.Load() != rounds || overlaps.Load() != 0 {
		t.Fatalf("%d runs with %d overlaps over %d rounds, want %d and 0", runs.Load(), overlaps.Load(), rounds, rounds)
	}
}

// TestJobSurvivesPanicsAndErrors: a panicking run is recovered and counted,
// a failing one is counted, and the job keeps running.
func TestJobSurvivesPanicsAndErrors(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	scheds, regs := replicas(t, rdb, prefix, 1)
	calls := 0
	job := platform.Job{Name: "wobbly", Schedule: "@every 1h", Run: func(context.Context) error {
		calls++
		switch calls {
		case 1:
			panic("boom")
		case 2:
			return errors.New("no luck")
		}
		return nil
	}}
	want := []string{platform.JobPanicked, platform.JobFailed, platform.JobOK}
	for i, w := range want {
		if got := scheds[0].RunOnce(context.Background(), job); got != w {
			t.Fatalf("run %d: %q, want %q", i+1, got, w)
		}
	}
	for _, o := range want {
		if n := runsOf(t, regs[0], "wobbly", o); n != 1 {
			t.Errorf("job_runs_total{outcome=%q} = %v, want 1", o, n)
		}
	}
}

// TestJobRunsUnlockedWhenRedisIsDown: Redis must never be what stops the
// pipeline, so a run whose lock cannot be taken goes ahead, counted as
// unlocked.
func TestJobRunsUnlockedWhenRedisIsDown(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: testenv.FreeAddr(t), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	scheds, _ := replicas(t, rdb, "down:", 1)
	ran := false
	got := scheds[0].RunOnce(context.Background(), platform.Job{Name: "needs-no-redis", Schedule: "@every 1h", Run: func(context.Context) error {
		ran = true
		return nil
	}})
	if !ran || got != platform.JobUnlocked {
		t.Fatalf("ran=%v outcome %q, want the run to go ahead as %q", ran, got, platform.JobUnlocked)
	}
}

// TestScheduledJobNeverOverlapsItself: a run that outlasts its interval
// makes the next ticks skip, counted as running, and stop waits for it.
func TestScheduledJobNeverOverlapsItself(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	scheds, regs := replicas(t, rdb, prefix, 1)
	var inside, overlaps, runs atomic.Int32
	testenv.Must(t, scheds[0].Add(platform.Job{Name: "slow", Schedule: "@every 1s", Run: func(ctx context.Context) error {
		if inside.Add(1) > 1 {
			overlaps.Add(1)
		}
		defer inside.Add(-1)
		runs.Add(1)
		select {
		case <-time.After(2500 * time.Millisecond):
		case <-ctx.Done():
		}
		return nil
	}}))
	scheds[0].Start()
	testenv.WaitFor(t, 10*time.Second, "a tick to find the slow run still going", func() bool {
		return runsOf(t, regs[0], "slow", platform.JobRunning) >= 1
	})
	testenv.Must(t, scheds[0].Stop(context.Background()))
	if overlaps.Load() != 0 || runs.Load() == 0 {
		t.Fatalf("%d runs, %d overlapping, want at least one and none overlapping", runs.Load(), overlaps.Load())
	}
}

// runsOf reads job_runs_total{job, outcome} from reg.
func runsOf(t *testing.T, reg *prometheus.Registry, job, outcome string) float64 {
	t.Helper()
	return testenv.Metric(t, reg, "job_runs_total", "job", job, "outcome", outcome)
}

// TestEachJobPassIsASpan: with tracing on every pass is the root span "job
// <name>" with the pass's outcome, failed when the pass failed or
// panicked, and the pass runs in it; a replica that finds the lock taken
// says so in a span of its own.
func TestEachJobPassIsASpan(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	rec := spantest.NewRecorder(t)
	reg := prometheus.NewRegistry()
	s, err := platform.NewScheduler(redislock.New(rdb, prefix), 5*time.Second, testenv.Logger(t), reg, rec.Provider)
	testenv.Must(t, err)
	var inSpan []trace.SpanContext
	calls := 0
	job := platform.Job{Name: "traced", Schedule: "@every 1h", Run: func(ctx context.Context) error {
		inSpan = append(inSpan, trace.SpanContextFromContext(ctx))
		calls++
		switch calls {
		case 2:
			return errors.New("no luck")
		case 3:
			panic("boom")
		}
		return nil
	}}
	for range 3 {
		s.RunOnce(context.Background(), job)
	}
	// Another replica holds the lock for the fourth pass.
	holder, err := redislock.New(rdb, prefix).Acquire(context.Background(), "traced", 5*time.Second)
	testenv.Must(t, err)
	if got := s.RunOnce(context.Background(), job); got != platform.JobLocked {
		t.Fatalf("pass with the lock held elsewhere: %s", got)
	}
	testenv.Must(t, holder.Release(context.Background()))

	spans := spantest.Named(rec.Spans(), "job traced")
	if len(spans) != 4 {
		t.Fatalf("%d job spans, want 4:\n%s", len(spans), spantest.List(rec.Spans()))
	}
	for i, want := range []struct {
		outcome string
		failed  bool
	}{{platform.JobOK, false}, {platform.JobFailed, true}, {platform.JobPanicked, true}, {platform.JobLocked, false}} {
		s := spans[i]
		if s.Parent != "" || s.Attrs["job"] != "traced" || s.Attrs["outcome"] != want.outcome || s.Failed != want.failed {
			t.Errorf("pass %d: span %s failed=%v, want a root span with outcome %s failed=%v", i+1, s, s.Failed, want.outcome, want.failed)
		}
		if i < 3 && inSpan[i].SpanID().String() != s.SpanID {
			t.Errorf("pass %d ran in span %s, not in its own %s", i+1, inSpan[i].SpanID(), s.SpanID)
		}
	}
}

// TestJobRunsOncePerIntervalAcrossReplicas: three replicas tick the same
// two-second job, each from its own start time, so their ticks fall on
// different seconds of each interval; the job runs once per interval in
// all, and the replicas that tick after the interval's run count it as
// taken. (With only the lock, released at the end of each run, a replica
// ticking a second later ran the same interval again.)
func TestJobRunsOncePerIntervalAcrossReplicas(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	scheds, regs := replicas(t, rdb, prefix, 3)
	var runs atomic.Int32
	job := platform.Job{Name: "once-per-interval", Schedule: "@every 2s", Run: func(context.Context) error {
		runs.Add(1)
		return nil
	}}
	for i, s := range scheds {
		testenv.Must(t, s.Add(job))
		s.Start()
		if i < len(scheds)-1 {
			time.Sleep(700 * time.Millisecond) // the replicas start apart
		}
	}
	began := time.Now()
	time.Sleep(8 * time.Second)
	for _, s := range scheds {
		testenv.Must(t, s.Stop(context.Background()))
	}
	intervals := time.Since(began).Seconds()/2 + 1 // the intervals the run touched, the first one partly
	taken := 0.0
	for _, reg := range regs {
		taken += runsOf(t, reg, job.Name, platform.JobTaken)
	}
	if n := float64(runs.Load()); n > intervals+1 || n < intervals-2 || taken == 0 {
		t.Fatalf("%v runs (%v taken by another replica) in about %.1f two-second intervals, want one run per interval", n, taken, intervals)
	}
}
