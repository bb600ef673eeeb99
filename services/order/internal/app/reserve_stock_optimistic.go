package app

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/oncemall/oncemall/services/order/internal/order"
)

// optimisticAttempts bounds how many times one order's transaction runs in
// the optimistic variant before it gives up with order.ErrStockContention.
// On a hot product each round of racing orders sells about one unit (every
// other order's compare-and-set finds the version moved), so an order may
// need about as many attempts as there are units ahead of it; the bound is
// what keeps a request's latency finite under that contention.
const optimisticAttempts = 30

// errSwapLost is a lost compare-and-set: the stock's version moved between
// this transaction's read and its write. Nothing is wrong with the order;
// the transaction rolls back and runs again.
var errSwapLost = errors.New("stock version changed since it was read")

// reserveOptimistic is the optimistic-lock variant (ORDER_STOCK_MODE=
// optimistic, lab only): read the stock and its version without a lock,
// decide, then write only if the version is still the one read:
//
//	UPDATE product_stock SET available = <read> - n, version = version + 1
//	WHERE product_id = ? AND version = <read version>
//
// It never oversells: of the orders that read one version, the first to
// write changes the row and the others change nothing (rows affected 0).
// The losers cannot simply read again inside their transaction (REPEATABLE
// READ would show them the same snapshot), so the whole transaction is
// retried (retrySwaps).
func (a *App) reserveOptimistic(ctx context.Context, tx order.Tx, l order.Line) error {
	s, err := tx.ReadStock(ctx, l.ProductID)
	if err != nil {
		return err
	}
	if s.Available < l.Quantity {
		return order.OutOfStock(l.ProductID, l.Quantity)
	}
	swapped, err := tx.SwapStock(ctx, s, s.Available-l.Quantity)
	if err != nil {
		return err
	}
	if !swapped {
		return fmt.Errorf("product %d at version %d: %w", l.ProductID, s.Version, errSwapLost)
	}
	return nil
}

// retrySwaps runs one order's transaction until it does not lose a
// compare-and-set, at most optimisticAttempts times, waiting a little
// longer (with jitter) after each loss so the racing orders spread out.
func (a *App) retrySwaps(ctx context.Context, run func() error) error {
	for attempt := 1; ; attempt++ {
		err := run()
		if !errors.Is(err, errSwapLost) {
			return err
		}
		if attempt == optimisticAttempts {
			a.m.stock.WithLabelValues(string(Optimistic), "contention").Inc()
			return fmt.Errorf("%w: gave up after %d attempts: %w", order.ErrStockContention, attempt, err)
		}
		wait := time.Duration(1+rand.IntN(2*min(attempt, 10))) * time.Millisecond
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(wait):
		}
	}
}
