package platform

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/robfig/cron/v3"

	"github.com/oncemall/oncemall/pkg/metrics"
	"github.com/oncemall/oncemall/pkg/redislock"
)

// Job is a scheduled task of a service: a thin function that calls a use
// case. Every run is recovered from a panic, never overlaps the previous run
// on the same replica, and runs on one replica at a time under the Redis
// lock named Name. The lock saves work; it must not be what makes the job
// correct (a lock can expire during a long pause, and when Redis does not
// answer the run goes ahead unlocked), so a job claims its rows with
// conditional updates or SKIP LOCKED like everything else here.
type Job struct {
	// Name names the lock (under "oncemall:<service>:lock:"), the log lines
	// and the job label of job_runs_total.
	Name string
	// Schedule is a robfig/cron spec: "@every 2s", "0 3 * * *".
	Schedule string
	// Run is one pass. Its context ends at shutdown.
	Run func(ctx context.Context) error
	// EveryReplica runs the job on every replica, without the lock: for work
	// that is local to the process (the relay's safety-net poll).
	EveryReplica bool
}

// Outcomes of a job run: the outcome label of job_runs_total.
const (
	JobOK       = "ok"       // ran and returned nil
	JobFailed   = "failed"   // ran and returned an error (logged)
	JobPanicked = "panicked" // ran and panicked (recovered, logged)
	JobLocked   = "locked"   // skipped: another replica holds the lock
	JobRunning  = "running"  // skipped: the previous run on this replica is still going
	JobUnlocked = "unlocked" // the lock was unavailable (Redis down); ran without it
)

// scheduler runs a service's jobs on one cron.
type scheduler struct {
	cron     *cron.Cron
	locks    *redislock.Client
	lockTTL  time.Duration
	log      *slog.Logger
	ctx      context.Context
	cancel   context.CancelFunc
	runs     *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newScheduler(locks *redislock.Client, lockTTL time.Duration, log *slog.Logger, reg prometheus.Registerer) (*scheduler, error) {
	runs, err := metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "job_runs_total",
		Help: "Scheduled job runs by job and outcome (ok, failed, panicked, unlocked; skipped as locked or running).",
	}, []string{"job", "outcome"}))
	if err != nil {
		return nil, err
	}
	duration, err := metrics.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "job_duration_seconds",
		Help:    "Duration of the scheduled job runs that ran on this replica.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
	}, []string{"job"}))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &scheduler{
		cron: cron.New(), locks: locks, lockTTL: lockTTL, log: log,
		ctx: ctx, cancel: cancel, runs: runs, duration: duration,
	}, nil
}

// add schedules j. A spec that does not parse is an error naming the job.
func (s *scheduler) add(j Job) error {
	if j.Name == "" || j.Run == nil {
		return errors.New("job: Name and Run are required")
	}
	var running atomic.Bool
	if _, err := s.cron.AddFunc(j.Schedule, func() {
		if !running.CompareAndSwap(false, true) {
			s.count(j.Name, JobRunning)
			return
		}
		defer running.Store(false)
		s.runOnce(s.ctx, j)
	}); err != nil {
		return fmt.Errorf("job %s: schedule %q: %w", j.Name, j.Schedule, err)
	}
	// Every outcome starts at zero, so a dashboard or alert sees the series
	// before the first run.
	for _, o := range []string{JobOK, JobFailed, JobPanicked, JobLocked, JobRunning, JobUnlocked} {
		s.runs.WithLabelValues(j.Name, o)
	}
	return nil
}

// runOnce runs j once, under its lock unless it runs on every replica, and
// reports the outcome.
func (s *scheduler) runOnce(ctx context.Context, j Job) string {
	if j.EveryReplica {
		return s.count(j.Name, s.call(ctx, j))
	}
	outcome := ""
	err := s.locks.Run(ctx, j.Name, s.lockTTL, func(ctx context.Context) error {
		outcome = s.call(ctx, j)
		return nil
	})
	switch {
	case outcome != "":
	case errors.Is(err, redislock.ErrNotAcquired):
		outcome = JobLocked
	case ctx.Err() != nil:
		return ""
	default:
		// Redis must never be what stops the pipeline: run unlocked.
		s.log.Warn("job lock unavailable, running unlocked", "job", j.Name, "err", err)
		if outcome = s.call(ctx, j); outcome == JobOK {
			outcome = JobUnlocked
		}
	}
	return s.count(j.Name, outcome)
}

// call runs j.Run, recovering a panic, and returns the outcome.
func (s *scheduler) call(ctx context.Context, j Job) (outcome string) {
	began := time.Now()
	defer func() {
		s.duration.WithLabelValues(j.Name).Observe(time.Since(began).Seconds())
		if p := recover(); p != nil {
			s.log.Error("job panicked", "job", j.Name, "panic", fmt.Sprint(p))
			outcome = JobPanicked
		}
	}()
	if err := j.Run(ctx); err != nil && ctx.Err() == nil {
		s.log.Error("job failed", "job", j.Name, "err", err)
		return JobFailed
	}
	return JobOK
}

func (s *scheduler) count(job, outcome string) string {
	if outcome != "" {
		s.runs.WithLabelValues(job, outcome).Inc()
	}
	return outcome
}

func (s *scheduler) start() { s.cron.Start() }

// stop stops scheduling, cancels running jobs and waits for them until ctx
// ends.
func (s *scheduler) stop(ctx context.Context) error {
	done := s.cron.Stop()
	s.cancel()
	select {
	case <-done.Done():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("jobs still running: %w", ctx.Err())
	}
}
