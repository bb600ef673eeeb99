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

	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/redislock"
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
		s, err := platform.NewScheduler(redislock.New(rdb, prefix), 5*time.Second, testenv.Logger(t), reg)
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
	mfs, err := reg.Gather()
	testenv.Must(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "job_runs_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["job"] == job && labels["outcome"] == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
