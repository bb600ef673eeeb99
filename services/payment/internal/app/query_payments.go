package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/oncemall/oncemall/pkg/psp"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// QueryReport is what one QueryPayments run did.
type QueryReport struct {
	Asked  int // payments the platform was asked about
	Paid   int // of them, answered paid (applied now, or already by a notification)
	Failed int // of them, not settled by the answer (the run's error says why)
}

// QueryPayments is the active query: it asks the platform about the
// payments still WAIT_PAY between Config.QueryAfter and Config.QueryHorizon
// after their creation, the least recently asked first, up to
// Config.QueryBatch. Notifications can all be lost (the platform gives up
// retrying, a network partition outlasts its schedule), while the customer
// was charged; the platform's answer settles it.
//
// A paid answer is applied through handlePaidFixed, the notification's path:
// a notification arriving at the same moment is a duplicate of it (one
// record, one payment.succeeded), and a payment whose order closed meanwhile
// is refunded. Any other answer changes nothing but the time the payment was
// last asked about. One payment's failure does not stop the run; the run
// returns every failure, joined.
func (a *App) QueryPayments(ctx context.Context) (QueryReport, error) {
	var rep QueryReport
	if a.platform == nil {
		return rep, fmt.Errorf("query payments: %w", errNoPlatform)
	}
	now := a.now()
	due, err := a.store.DueForQuery(ctx, now.Add(-a.cfg.QueryHorizon), now.Add(-a.cfg.QueryAfter), a.cfg.QueryBatch)
	if err != nil {
		return rep, fmt.Errorf("query payments: %w", err)
	}
	var errs []error
	for _, p := range due {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		rep.Asked++
		answer, err := a.queryOne(ctx, p)
		a.m.queries.WithLabelValues(answer).Inc()
		switch {
		case err != nil:
			rep.Failed++
			errs = append(errs, err)
		case answer == "paid":
			rep.Paid++
		}
	}
	return rep, errors.Join(errs...)
}

// queryOne asks about p and applies the answer; it returns the answer's
// label for payment_queries_total.
func (a *App) queryOne(ctx context.Context, p payment.Payment) (string, error) {
	trade, err := a.platform.Query(ctx, p.OutTradeNo)
	switch {
	case errors.Is(err, psp.ErrUnknownCharge):
		// The charge never reached the platform: nobody can have paid it.
		return "unknown", a.store.MarkQueried(ctx, p.OutTradeNo, a.now())
	case err != nil:
		a.log.WarnContext(ctx, "payment query failed", "out_trade_no", p.OutTradeNo, "err", err)
		return "error", fmt.Errorf("query payment %s: %w", p.OutTradeNo, err)
	case trade.Paid():
		outcome, err := a.handlePaidFixed(ctx, transactionOf(p.OutTradeNo, trade.Channel, trade.PlatformSerial, trade.Amount, *trade.PaidAt))
		if err != nil {
			return "error", fmt.Errorf("apply the query's answer for payment %s: %w", p.OutTradeNo, err)
		}
		a.log.InfoContext(ctx, "payment found paid by a query", "out_trade_no", p.OutTradeNo, "platform_serial", trade.PlatformSerial, "outcome", outcome)
		return "paid", nil
	case trade.Status == psp.StatusClosed:
		// The platform closed a charge we still wait on (it expired there):
		// nothing can be paid any more, and the order's close settles ours.
		a.log.WarnContext(ctx, "platform reports a waiting payment's charge closed", "out_trade_no", p.OutTradeNo)
		return "closed", a.store.MarkQueried(ctx, p.OutTradeNo, a.now())
	default:
		return "waiting", a.store.MarkQueried(ctx, p.OutTradeNo, a.now())
	}
}
