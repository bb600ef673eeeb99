// Package jobs runs the coupon service's cron jobs: the retry pass over the
// local message table and the archiving of expired idempotent records. The
// jobs are thin; the use cases live in app.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/robfig/cron/v3"

	"github.com/oncemall/oncemall/services/coupon/internal/app"
)

// Config holds the cron schedules (robfig/cron specs such as "@every 2s").
type Config struct {
	RetrySchedule   string
	ArchiveSchedule string
}

// Validate checks that both schedules parse.
func (c Config) Validate() error {
	var errs []error
	if _, err := cron.ParseStandard(c.RetrySchedule); err != nil {
		errs = append(errs, fmt.Errorf("COUPON_RETRY_SCHEDULE: %w", err))
	}
	if _, err := cron.ParseStandard(c.ArchiveSchedule); err != nil {
		errs = append(errs, fmt.Errorf("COUPON_ARCHIVE_SCHEDULE: %w", err))
	}
	return errors.Join(errs...)
}

// Scheduler runs the jobs on every replica. They are safe to run on several
// replicas at once: the retry pass claims messages with SELECT ... FOR UPDATE
// SKIP LOCKED plus a lease, and the archive moves SKIP LOCKED batches, so no
// message or record is handled by two replicas at the same moment. A
// distributed lock would only save the empty queries of the losers.
type Scheduler struct {
	cron   *cron.Cron
	ctx    context.Context
	cancel context.CancelFunc
}

// New schedules the jobs on a, plus whatever the schedulers in more add to
// the same cron (the outbox relay's poll and cleanup); call Start to run them.
func New(a *app.App, cfg Config, log *slog.Logger, more ...func(*cron.Cron) error) (*Scheduler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	// SkipIfStillRunning: a slow pass is not overlapped by the next one on
	// the same replica.
	c := cron.New(cron.WithChain(cron.Recover(cron.DiscardLogger), cron.SkipIfStillRunning(cron.DiscardLogger)))
	if _, err := c.AddFunc(cfg.RetrySchedule, func() {
		r, err := a.ProcessDueMessages(ctx)
		if err != nil {
			log.Error("coupon retry pass failed", "err", err)
			return
		}
		if r.Claimed > 0 {
			log.Info("coupon retry pass", "claimed", r.Claimed, "deducted", r.Deducted, "absorbed", r.Absorbed,
				"retried", r.Retried, "failed", r.Failed)
		}
	}); err != nil {
		cancel()
		return nil, fmt.Errorf("schedule retry job: %w", err)
	}
	if _, err := c.AddFunc(cfg.ArchiveSchedule, func() {
		n, err := a.ArchiveIdempotentRecords(ctx)
		if err != nil {
			log.Error("idempotent record archive failed", "archived", n, "err", err)
			return
		}
		if n > 0 {
			log.Info("idempotent records archived", "archived", n)
		}
	}); err != nil {
		cancel()
		return nil, fmt.Errorf("schedule archive job: %w", err)
	}
	for _, add := range more {
		if err := add(c); err != nil {
			cancel()
			return nil, err
		}
	}
	return &Scheduler{cron: c, ctx: ctx, cancel: cancel}, nil
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
