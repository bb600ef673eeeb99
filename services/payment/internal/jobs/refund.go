package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/services/payment/internal/app"
)

// Refunder is the use case the payment-refund job runs (app.App.SendRefunds).
type Refunder interface {
	SendRefunds(ctx context.Context) (app.RefundReport, error)
}

// refundTimeout bounds one payment-refund run.
const refundTimeout = 2 * time.Minute

// Refund sends the pending refund requests to the platform on schedule,
// and logs what a run sent (each request is logged by the use case).
func Refund(r Refunder, schedule string, log *slog.Logger) platform.Job {
	return platform.Job{Name: "payment-refund", Schedule: schedule, Run: func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, refundTimeout)
		defer cancel()
		rep, err := r.SendRefunds(ctx)
		if rep.Sent+rep.Failed > 0 {
			log.InfoContext(ctx, "refund requests sent", "accepted", rep.Sent, "failed", rep.Failed)
		}
		return err
	}}
}
