// Package jobs declares the coupon service's scheduled jobs: the retry pass
// over the local message table, the archive of expired idempotent records,
// the sweeper of overdue coupon locks and the reconciliation. Each is a thin
// platform.Job calling one use case; the platform runs them (recovered,
// never overlapping, one replica at a time under a Redis lock). The lock
// saves work and nothing more: the retry pass claims its messages with SKIP
// LOCKED and a lease, the archive moves SKIP LOCKED batches, the fixed
// deduction is safe to repeat, the sweeper releases by conditional update
// and the reconciliation only reads.
package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
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

// SweepLocks is the coupon-sweep job: it releases the locks past their
// deadline whose order the order service reports not found or cancelled,
// then deletes the expired release records and holds (app.ForgetReleases).
// A pass that could not reach the order service returns its error (the
// platform logs it and counts the run failed); the locks wait for the next
// pass, and the records for the next pass that reaches it.
func SweepLocks(a *app.App, schedule string, log *slog.Logger) platform.Job {
	return platform.Job{Name: "coupon-sweep", Schedule: schedule, Run: func(ctx context.Context) error {
		r, err := a.SweepLocks(ctx)
		if r.Overdue > 0 {
			log.InfoContext(ctx, "coupon sweep", "overdue", r.Overdue, "released", r.Released, "kept", r.Kept,
				"unreachable", r.Unreachable, "bad_answers", r.BadAnswers)
		}
		if err != nil {
			return err
		}
		n, err := a.ForgetReleases(ctx)
		if n > 0 {
			log.InfoContext(ctx, "coupon sweep forgot expired lock releases and holds", "deleted", n)
		}
		return err
	}}
}

// reconcileTimeout bounds one reconciliation, so that a stuck query cannot
// hold the job (and its lock) until the next deploy.
const reconcileTimeout = 30 * time.Second

// Reconcile is the coupon-reconcile job: it runs the reconciliation on
// schedule (which keeps coupon_reconcile_findings up to date) and logs what
// it finds as an alert, with the count of each kind.
func Reconcile(a *app.App, schedule string, log *slog.Logger) platform.Job {
	return platform.Job{Name: "coupon-reconcile", Schedule: schedule, Run: func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, reconcileTimeout)
		defer cancel()
		as, err := a.Reconcile(ctx)
		if err != nil {
			return err
		}
		if len(as) == 0 {
			return nil
		}
		counts := make([]any, 0, 2*len(coupon.AnomalyKinds)+2)
		counts = append(counts, "alert", "coupon_reconcile")
		for _, kind := range coupon.AnomalyKinds {
			n := 0
			for _, an := range as {
				if an.Kind == kind {
					n++
				}
			}
			counts = append(counts, string(kind), n)
		}
		log.ErrorContext(ctx, "reconciliation found inconsistent coupons", counts...)
		return nil
	}}
}
