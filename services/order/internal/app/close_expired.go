package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/oncemall/oncemall/services/order/internal/order"
)

// CloseReport is what one pass of the order-close job did.
type CloseReport struct {
	// Expired is how many WAIT_PAY orders older than Config.PayTimeout the
	// pass found (at most Config.CloseBatch).
	Expired int
	// Cancelled is how many it cancelled.
	Cancelled int
	// Paid is how many turned out paid (the customer paid before the
	// charge closed): they are left to their payment.succeeded.
	Paid int
	// Failed is how many it could not close (the payment service did not
	// answer, a database error): they stay WAIT_PAY for the next pass.
	Failed int
}

// CloseExpired is one pass of the order-close job: up to Config.CloseBatch
// orders still WAIT_PAY Config.PayTimeout after they were created, oldest
// first, each closed as closeOrder does for reason "timeout". An order that
// cannot be closed now is left for the next pass; the pass goes on with
// the others and returns an error naming how many failed. It may run on
// several replicas at once (the job's lock saves work, it does not make
// this correct): each order is still cancelled once.
func (a *App) CloseExpired(ctx context.Context) (CloseReport, error) {
	var rep CloseReport
	nos, err := a.orders.Expired(ctx, a.now().Add(-a.cfg.PayTimeout), a.cfg.CloseBatch)
	if err != nil {
		return rep, fmt.Errorf("close expired orders: %w", err)
	}
	rep.Expired = len(nos)
	var first error
	for _, no := range nos {
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
		o, err := a.orders.Get(ctx, no)
		cancelled := false
		if err == nil {
			_, cancelled, err = a.closeOrder(ctx, o, order.ReasonTimeout)
		}
		switch {
		case cancelled:
			rep.Cancelled++
		case errors.Is(err, order.ErrConflict):
			rep.Paid++
		case err != nil:
			rep.Failed++
			a.log.WarnContext(ctx, "order not closed; the next pass retries it", "order_no", no, "err", err)
			if first == nil {
				first = err
			}
		}
	}
	if first != nil {
		return rep, fmt.Errorf("close expired orders: %d of %d not closed, the first: %w", rep.Failed, rep.Expired, first)
	}
	return rep, nil
}
