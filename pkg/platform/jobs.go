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
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncemall/oncemall/pkg/metrics"
	"github.com/oncemall/oncemall/pkg/redislock"
	"github.com/oncemall/oncemall/pkg/tracing"
)

// Job is a scheduled task of a service: a thin function that calls a use
// case. Every run is recovered from a panic, never overlaps the previous run
// on the same replica, and runs once per interval of its schedule across
// the replicas: the first replica to tick in an interval claims it in Redis,
// and runs under the Redis lock named Name, so a run longer than its
// interval is not overlapped by another replica's either. With tracing on, each pass is the root span of a trace,
// "job <Name>", whose outcome attribute is the job_runs_total outcome; what
// Run does with its context (an outbox row, say) joins that trace. The lock saves work; it must not be what makes the job
// correct (a lock can expire during a long pause, and when Redis does not
// answer the run goes ahead unlocked), so a job claims its rows with
// conditional updates or SKIP LOCKED like everything else here.
type Job struct {
	// Name names the lock (under "oncemall:<EVENT_SUBJECT_PREFIX><service>:lock:"), the log lines
	// and the job label of job_runs_total.
	Name string
	// Schedule is a robfig/cron spec: "@every 2s", "0 3 * * *".
	Schedule string
	// Run is one pass. Its context ends at shutdown.
	Run func(ctx context.Context) error
	// EveryReplica runs the job on every replica, without the lock: for work
	// that is local to the process (the relay's safety-net poll).
	EveryReplica bool

	// interval is the schedule's period, which numbers the intervals the
	// replicas claim; set by add.
	interval time.Duration

	// untraced keeps the passes out of the traces: set by the platform for
	// the relay's safety-net poll, a wake-up every second whose traces would
	// bury every other (the publishes it wakes have spans of their own).
	untraced bool
}

// Outcomes of a job run: the outcome label of job_runs_total.
const (
	JobOK       = "ok"       // ran and returned nil
	JobFailed   = "failed"   // ran and returned an error (logged)
	JobPanicked = "panicked" // ran and panicked (recovered, logged)
	JobLocked   = "locked"   // skipped: another replica holds the lock
	JobTaken    = "taken"    // skipped: another replica ran this interval
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
	// tracer starts the pass spans; nil when tracing is off.
	tracer trace.Tracer
}

func newScheduler(locks *redislock.Client, lockTTL time.Duration, log *slog.Logger, reg prometheus.Registerer, tp trace.TracerProvider) (*scheduler, error) {
	runs, err := metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "job_runs_total",
		Help: "Scheduled job runs by job and outcome (ok, failed, panicked, unlocked; skipped as locked, taken by another replica this interval, or running).",
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
	s := &scheduler{
		cron: cron.New(), locks: locks, lockTTL: lockTTL, log: log,
		ctx: ctx, cancel: cancel, runs: runs, duration: duration,
	}
	if tracing.Enabled(tp) {
		s.tracer = tp.Tracer("github.com/oncemall/oncemall/pkg/platform")
	}
	return s, nil
}

// add schedules j. A spec that does not parse is an error naming the job.
func (s *scheduler) add(j Job) error {
	if j.Name == "" || j.Run == nil {
		return errors.New("job: Name and Run are required")
	}
	sched, err := cron.ParseStandard(j.Schedule)
	if err != nil {
		return fmt.Errorf("job %s: schedule %q: %w", j.Name, j.Schedule, err)
	}
	first := sched.Next(time.Now())
	j.interval = sched.Next(first).Sub(first)
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
	for _, o := range []string{JobOK, JobFailed, JobPanicked, JobLocked, JobTaken, JobRunning, JobUnlocked} {
		s.runs.WithLabelValues(j.Name, o)
	}
	return nil
}

// runOnce runs j once, under its lock unless it runs on every replica, and
// reports the outcome; with tracing on, in a span that ends with it.
func (s *scheduler) runOnce(ctx context.Context, j Job) string {
	if s.tracer == nil || j.untraced {
		return s.run(ctx, j)
	}
	ctx, span := s.tracer.Start(ctx, "job "+j.Name, trace.WithNewRoot(), trace.WithAttributes(tracing.JobKey.String(j.Name)))
	outcome := s.run(ctx, j)
	if outcome != "" { // "" is a pass cut off by the shutdown
		span.SetAttributes(tracing.OutcomeKey.String(outcome))
	}
	if outcome == JobFailed || outcome == JobPanicked {
		span.SetStatus(codes.Error, "job "+outcome)
	}
	span.End()
	return outcome
}

func (s *scheduler) run(ctx context.Context, j Job) string {
	if j.EveryReplica {
		return s.count(j.Name, s.call(ctx, j))
	}
	// The interval's claim is never released: it expires after the next
	// interval, when no replica can still be ticking in this one. A
	// replica's ticks fall in one interval each, whatever the replicas'
	// start times, because the intervals are counted from the epoch.
	var err error
	if j.interval > 0 {
		slot := time.Now().UnixNano() / int64(j.interval)
		_, err = s.locks.Acquire(ctx, fmt.Sprintf("%s:interval:%d", j.Name, slot), 2*j.interval)
		if errors.Is(err, redislock.ErrNotAcquired) {
			return s.count(j.Name, JobTaken)
		}
	}
	outcome := ""
	if err == nil {
		err = s.locks.Run(ctx, j.Name, s.lockTTL, func(ctx context.Context) error {
			outcome = s.call(ctx, j)
			return nil
		})
	}
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
			trace.SpanFromContext(ctx).RecordError(fmt.Errorf("panic: %v", p))
			outcome = JobPanicked
		}
	}()
	if err := j.Run(ctx); err != nil && ctx.Err() == nil {
		s.log.Error("job failed", "job", j.Name, "err", err)
		trace.SpanFromContext(ctx).RecordError(err)
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
