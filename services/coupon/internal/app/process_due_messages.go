package app

import (
	"context"
	"fmt"
)

// PassResult counts what one pass of the retry job did.
type PassResult struct {
	Claimed  int
	Deducted int
	Absorbed int
	Retried  int
	Failed   int
}

// ProcessDueMessages is one pass of the retry job: it claims the PENDING
// messages that are due (see Store.ClaimDueMessages for why two replicas
// never claim the same one) and attempts each.
func (a *App) ProcessDueMessages(ctx context.Context) (PassResult, error) {
	msgs, err := a.store.ClaimDueMessages(ctx, a.now(), a.cfg.ClaimBatch, a.cfg.ClaimLease)
	if err != nil {
		return PassResult{}, fmt.Errorf("process due messages: %w", err)
	}
	r := PassResult{Claimed: len(msgs)}
	for _, m := range msgs {
		if ctx.Err() != nil {
			// The claim lease returns unprocessed messages to the pool.
			break
		}
		mctx, end := a.startDeduction(ctx, m)
		out, err := a.ProcessMessage(mctx, m)
		end(out)
		switch out {
		case Deducted:
			r.Deducted++
		case Absorbed:
			r.Absorbed++
		case Failed:
			r.Failed++
			a.log.WarnContext(ctx, "coupon message failed", "message_id", m.MessageID, "order_no", m.OrderNo,
				"coupon_id", m.CouponID, "err", err)
		default:
			r.Retried++
			a.log.WarnContext(ctx, "coupon deduction attempt failed, will retry", "message_id", m.MessageID,
				"order_no", m.OrderNo, "attempt", m.RetryCount+1, "err", err)
		}
	}
	return r, nil
}
