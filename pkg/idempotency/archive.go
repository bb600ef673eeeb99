package idempotency

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/robfig/cron/v3"

	"github.com/oncemall/oncemall/pkg/redislock"
)

// archiveLockName is the redislock name that keeps the archiver to one
// replica at a time.
const archiveLockName = "idempotency-archive"

// archiveLockTTL bounds how long a crashed archiver blocks the others; the
// lock is renewed while a run is in progress.
const archiveLockTTL = 30 * time.Second

// Archiver deletes records past their expire_time, in bounded batches, on a
// cron schedule, on one replica at a time.
type Archiver struct {
	store   *Store
	locks   *redislock.Client
	cfg     Config
	log     *slog.Logger
	deleted prometheus.Counter
	cron    *cron.Cron
}

// NewArchiver returns an archiver over store; locks keeps runs to one replica.
func NewArchiver(store *Store, locks *redislock.Client, cfg Config, log *slog.Logger, reg prometheus.Registerer) (*Archiver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &Archiver{
		store: store, locks: locks, cfg: cfg, log: log,
		deleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "idempotency_records_archived_total",
			Help: "Idempotency records deleted after their expire_time.",
		}),
	}
	reg.MustRegister(a.deleted)
	return a, nil
}

// RunOnce deletes expired records, ArchiveBatch at a time, until none is left
// or ArchiveMaxBatches statements ran, and returns how many it deleted.
func (a *Archiver) RunOnce(ctx context.Context) (int64, error) {
	var total int64
	for range a.cfg.ArchiveMaxBatches {
		n, err := a.store.DeleteExpired(ctx, a.store.now(), a.cfg.ArchiveBatch)
		total += n
		a.deleted.Add(float64(n))
		if err != nil {
			return total, err
		}
		if n < int64(a.cfg.ArchiveBatch) {
			break
		}
	}
	return total, nil
}

// runLocked is one scheduled run: under the lock, or skipped when another
// replica holds it.
func (a *Archiver) runLocked(ctx context.Context) {
	var n int64
	err := a.locks.Run(ctx, archiveLockName, archiveLockTTL, func(ctx context.Context) error {
		var err error
		n, err = a.RunOnce(ctx)
		return err
	})
	switch {
	case errors.Is(err, redislock.ErrNotAcquired):
		a.log.DebugContext(ctx, "idempotency archive skipped: another replica is running it")
	case err != nil:
		a.log.ErrorContext(ctx, "idempotency archive failed", "deleted", n, "err", err)
	case n > 0:
		a.log.InfoContext(ctx, "idempotency records archived", "deleted", n)
	}
}

// Start schedules the archiver; ctx bounds every run.
func (a *Archiver) Start(ctx context.Context) error {
	c := cron.New()
	if _, err := c.AddFunc(a.cfg.ArchiveSchedule, func() { a.runLocked(ctx) }); err != nil {
		return fmt.Errorf("idempotency archiver schedule %q: %w", a.cfg.ArchiveSchedule, err)
	}
	a.cron = c
	c.Start()
	return nil
}

// Stop stops scheduling and waits for a running run to end, until ctx ends.
func (a *Archiver) Stop(ctx context.Context) error {
	if a.cron == nil {
		return nil
	}
	select {
	case <-a.cron.Stop().Done():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
