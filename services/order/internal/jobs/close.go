// Package jobs holds the order service's scheduled jobs: thin functions
// returning a platform.Job that call one use case.
package jobs

import (
	"context"
	"log/slog"

	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/services/order/internal/app"
)

// Closer is the use case the order-close job runs (app.App.CloseExpired).
type Closer interface {
	CloseExpired(ctx context.Context) (app.CloseReport, error)
}

// Close runs one pass of closing the orders unpaid past ORDER_PAY_TIMEOUT
// on schedule. The platform runs it on one replica at a time under its
// Redis lock; the use case is correct without the lock too.
func Close(c Closer, schedule string, log *slog.Logger) platform.Job {
	return platform.Job{Name: "order-close", Schedule: schedule, Run: func(ctx context.Context) error {
		rep, err := c.CloseExpired(ctx)
		if rep.Expired > 0 {
			log.InfoContext(ctx, "order-close pass", "expired", rep.Expired, "cancelled", rep.Cancelled, "paid", rep.Paid, "failed", rep.Failed)
		}
		return err
	}}
}
