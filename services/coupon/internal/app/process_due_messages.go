package app

import (
	"context"
	"fmt"
	"sync"

	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
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
// messages that are due, a batch at a time (see Store.ClaimDueMessages for
// why two replicas never claim the same one), attempts each batch's
// messages on Workers goroutines, and claims again while batches come back
// full, so a backlog drains in one pass instead of one batch per interval.
// Each message is still attempted by one goroutine: what keeps a deduction
// single is the ledger's unique key and the message's state, not the order
// of the attempts.
func (a *App) ProcessDueMessages(ctx context.Context) (PassResult, error) {
	var r PassResult
	for ctx.Err() == nil {
		msgs, err := a.store.ClaimDueMessages(ctx, a.now(), a.cfg.ClaimBatch, a.cfg.ClaimLease)
		if err != nil {
			return r, fmt.Errorf("process due messages: %w", err)
		}
		r.Claimed += len(msgs)
		a.attemptAll(ctx, msgs, &r)
		if len(msgs) < a.cfg.ClaimBatch {
			break
		}
	}
	return r, nil
}

// attemptAll attempts msgs on up to Workers goroutines and adds the
// outcomes to r.
func (a *App) attemptAll(ctx context.Context, msgs []coupon.Message, r *PassResult) {
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		next = make(chan coupon.Message)
	)
	for range min(a.cfg.Workers, len(msgs)) {
		wg.Go(func() {
			for m := range next {
				out := a.attempt(ctx, m)
				mu.Lock()
				r.add(out)
				mu.Unlock()
			}
		})
	}
	for _, m := range msgs {
		if ctx.Err() != nil {
			// The claim lease returns unattempted messages to the pool.
			break
		}
		next <- m
	}
	close(next)
	wg.Wait()
}

// add counts one attempt's outcome.
func (r *PassResult) add(out Outcome) {
	switch out {
	case Deducted:
		r.Deducted++
	case Absorbed:
		r.Absorbed++
	case Failed:
		r.Failed++
	default:
		r.Retried++
	}
}

// attempt makes one attempt at m, in a span of its own, and logs what went
// wrong: the attempt of a delivery that landed m, and each attempt of the
// retry pass.
func (a *App) attempt(ctx context.Context, m coupon.Message) Outcome {
	mctx, end := a.startDeduction(ctx, m)
	out, err := a.ProcessMessage(mctx, m)
	end(out)
	switch out {
	case Deducted, Absorbed:
	case Failed:
		a.log.WarnContext(mctx, "coupon message failed", "message_id", m.MessageID, "order_no", m.OrderNo,
			"coupon_id", m.CouponID, "err", err)
	default:
		a.log.WarnContext(mctx, "coupon deduction attempt failed, will retry", "message_id", m.MessageID,
			"order_no", m.OrderNo, "attempt", m.RetryCount+1, "err", err)
	}
	return out
}
