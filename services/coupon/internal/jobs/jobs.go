// Package jobs runs the coupon service's cron jobs: the retry pass over the
// local message table and the archiving of expired idempotent records. The
// jobs are thin; the use cases live in app.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/oncemall/oncemall/pkg/redislock"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
)

// Config holds the cron schedules (robfig/cron specs such as "@every 2s").
type Config struct {
	RetrySchedule   string
	ArchiveSchedule string
	// LockTTL bounds how long a crashed replica's lock blocks the others;
	// the lock is refreshed while a pass runs.
	LockTTL time.Duration
}

// Locker runs fn while holding the named lock, on one replica at a time, and
// returns redislock.ErrNotAcquired without running fn when another replica
// holds it. *redislock.Client is the production Locker.
type Locker interface {
	Run(ctx context.Context, name string, ttl time.Duration, fn func(ctx context.Context) error) error
}

// Lock names, under the Locker's key prefix.
const (
	RetryLock   = "coupon-retry-pass"
	ArchiveLock = "coupon-archive"
)

// Validate checks that both schedules parse.
func (c Config) Validate() error {
	var errs []error
	if _, err := cron.ParseStandard(c.RetrySchedule); err != nil {
		errs = append(errs, fmt.Errorf("COUPON_RETRY_SCHEDULE: %w", err))
	}
	if _, err := cron.ParseStandard(c.ArchiveSchedule); err != nil {
		errs = append(errs, fmt.Errorf("COUPON_ARCHIVE_SCHEDULE: %w", err))
	}
	if c.LockTTL < time.Second {
		errs = append(errs, fmt.Errorf("COUPON_JOB_LOCK_TTL: %s is below 1s", c.LockTTL))
	}
	return errors.Join(errs...)
}

// Scheduler runs the jobs on every replica, each pass under a Redis lock so
// that one replica runs it at a time. The lock saves work; it is not what
// makes the jobs correct. The retry pass claims messages with SELECT ... FOR
// UPDATE SKIP LOCKED plus a lease, and the archive moves SKIP LOCKED batches,
// so two replicas running at once (the lock expired during a long pause, or
// Redis is down and the passes run unlocked) still never handle the same
// message or record at the same moment, and the fixed deduction is safe to
// repeat anyway.
type Scheduler struct {
	cron   *cron.Cron
	ctx    context.Context
	cancel context.CancelFunc
	app    *app.App
	lock   Locker
	cfg    Config
	log    *slog.Logger
}

// New schedules the jobs on a, plus whatever the schedulers in more add to
// the same cron (the outbox relay's poll and cleanup); call Start to run them.
// lock may be nil: the passes then run unlocked on every replica.
func New(a *app.App, cfg Config, lock Locker, log *slog.Logger, more ...func(*cron.Cron) error) (*Scheduler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	// SkipIfStillRunning: a slow pass is not overlapped by the next one on
	// the same replica.
	c := cron.New(cron.WithChain(cron.Recover(cron.DiscardLogger), cron.SkipIfStillRunning(cron.DiscardLogger)))
	s := &Scheduler{cron: c, ctx: ctx, cancel: cancel, app: a, lock: lock, cfg: cfg, log: log}
	if _, err := c.AddFunc(cfg.RetrySchedule, func() { s.RetryPass(s.ctx) }); err != nil {
		cancel()
		return nil, fmt.Errorf("schedule retry job: %w", err)
	}
	if _, err := c.AddFunc(cfg.ArchiveSchedule, func() { s.ArchivePass(s.ctx) }); err != nil {
		cancel()
		return nil, fmt.Errorf("schedule archive job: %w", err)
	}
	for _, add := range more {
		if err := add(c); err != nil {
			cancel()
			return nil, err
		}
	}
	return s, nil
}

// RetryPass is one run of the retry job, as the cron calls it. It reports
// whether the pass ran on this replica.
func (s *Scheduler) RetryPass(ctx context.Context) bool {
	return s.locked(ctx, RetryLock, func(ctx context.Context) error {
		r, err := s.app.ProcessDueMessages(ctx)
		if err != nil {
			return err
		}
		if r.Claimed > 0 {
			s.log.Info("coupon retry pass", "claimed", r.Claimed, "deducted", r.Deducted, "absorbed", r.Absorbed,
				"retried", r.Retried, "failed", r.Failed)
		}
		return nil
	})
}

// ArchivePass is one run of the archive job. It reports whether the pass ran
// on this replica.
func (s *Scheduler) ArchivePass(ctx context.Context) bool {
	return s.locked(ctx, ArchiveLock, func(ctx context.Context) error {
		n, err := s.app.ArchiveIdempotentRecords(ctx)
		if n > 0 {
			s.log.Info("idempotent records archived", "archived", n)
		}
		return err
	})
}

// locked runs pass under the named lock. Another replica holding the lock
// skips the pass; a Redis failure runs it unlocked, because Redis must never
// be what stops the pipeline (see Scheduler).
func (s *Scheduler) locked(ctx context.Context, name string, pass func(context.Context) error) bool {
	if s.lock == nil {
		s.report(name, pass(ctx))
		return true
	}
	ran := false
	err := s.lock.Run(ctx, name, s.cfg.LockTTL, func(ctx context.Context) error {
		ran = true
		return pass(ctx)
	})
	switch {
	case ran:
		s.report(name, err)
	case errors.Is(err, redislock.ErrNotAcquired):
		s.log.Debug("job lock held by another replica, skipping this pass", "job", name)
	default:
		s.log.Warn("job lock unavailable, running the pass unlocked", "job", name, "err", err)
		s.report(name, pass(ctx))
		ran = true
	}
	return ran
}

func (s *Scheduler) report(name string, err error) {
	if err != nil && !errors.Is(err, context.Canceled) {
		s.log.Error("job pass failed", "job", name, "err", err)
	}
}

// Start runs the schedule in the background.
func (s *Scheduler) Start() { s.cron.Start() }

// Stop stops scheduling, cancels running passes (a claimed message that was
// not attempted returns to the pool when its lease ends) and waits for them
// until ctx ends.
func (s *Scheduler) Stop(ctx context.Context) error {
	done := s.cron.Stop()
	s.cancel()
	select {
	case <-done.Done():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("cron jobs still running: %w", ctx.Err())
	}
}
