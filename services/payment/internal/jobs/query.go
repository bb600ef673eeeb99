package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/services/payment/internal/app"
)

// Querier is the use case the payment-query job runs (app.App.QueryPayments).
type Querier interface {
	QueryPayments(ctx context.Context) (app.QueryReport, error)
}

// queryTimeout bounds one payment-query run: a batch of platform calls,
// each bounded by PSP_TIMEOUT.
const queryTimeout = 2 * time.Minute

// Query asks the platform about payments still waiting for their
// notification, on schedule, and logs what a run found (each payment found
// paid is logged by the use case).
func Query(q Querier, schedule string, log *slog.Logger) platform.Job {
	return platform.Job{Name: "payment-query", Schedule: schedule, Run: func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, queryTimeout)
		defer cancel()
		rep, err := q.QueryPayments(ctx)
		if rep.Asked > 0 {
			log.InfoContext(ctx, "waiting payments queried", "asked", rep.Asked, "paid", rep.Paid, "failed", rep.Failed)
		}
		return err
	}}
}
