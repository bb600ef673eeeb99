// Package jobs declares the coupon service's scheduled jobs: the retry pass
// over the local message table and the archive of expired idempotent
// records. Each is a thin platform.Job calling one use case; the platform
// runs them (recovered, never overlapping, one replica at a time under a
// Redis lock). The lock saves work and nothing more: the retry pass claims
// its messages with SKIP LOCKED and a lease, the archive moves SKIP LOCKED
// batches, and the fixed deduction is safe to repeat.
package jobs

import (
	"context"
	"log/slog"

	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
)

// RetryPass is the job that deducts the due coupon messages, on schedule (a
// cron spec such as "@every 2s").
func RetryPass(a *app.App, schedule string, log *slog.Logger) platform.Job {
	return platform.Job{Name: "coupon-retry-pass", Schedule: schedule, Run: func(ctx context.Context) error {
		r, err := a.ProcessDueMessages(ctx)
		if err != nil {
			return err
		}
		if r.Claimed > 0 {
			log.InfoContext(ctx, "coupon retry pass", "claimed", r.Claimed, "deducted", r.Deducted,
				"absorbed", r.Absorbed, "retried", r.Retried, "failed", r.Failed)
		}
		return nil
	}}
}

// ArchiveRecords is the job that moves expired biz_idempotent_record rows
// to the archive table, on schedule.
func ArchiveRecords(a *app.App, schedule string, log *slog.Logger) platform.Job {
	return platform.Job{Name: "coupon-archive", Schedule: schedule, Run: func(ctx context.Context) error {
		n, err := a.ArchiveIdempotentRecords(ctx)
		if n > 0 {
			log.InfoContext(ctx, "idempotent records archived", "archived", n)
		}
		return err
	}}
}
