package lab

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/oncemall/oncemall/services/order/internal/app"
	"github.com/oncemall/oncemall/services/order/internal/order"
)

// StockTx is what incident 5's broken and optimistic variants need of an
// order transaction beyond order.Tx: the store's transaction has it, the
// domain's interface does not carry it.
type StockTx interface {
	// ReadStock reads a product's stock with a plain, non-locking read (a
	// product without a stock row has none: zero available, version 0).
	ReadStock(ctx context.Context, productID uint64) (order.Stock, error)
	// WriteStock sets a product's available units to a value the caller
	// computed, whatever the row holds now.
	WriteStock(ctx context.Context, productID uint64, available int) error
	// SwapStock sets a product's available units if its version is still
	// the one read in s, and reports whether it did.
	SwapStock(ctx context.Context, s order.Stock, available int) (bool, error)
}

// stockTx is tx's StockTx.
func stockTx(tx order.Tx) (StockTx, error) {
	s, ok := tx.(StockTx)
	if !ok {
		return nil, fmt.Errorf("lab: the order transaction %T cannot read and write stock directly", tx)
	}
	return s, nil
}

// BrokenStock is incident 5's broken variant (ORDER_STOCK_MODE=broken):
// the read-modify-write that oversells. It is app.FixedStock's decision
// moved into the application, in three steps; what breaks is the gap
// between the first and the third.
type BrokenStock struct{}

// Mode is "broken".
func (BrokenStock) Mode() string { return "broken" }

// Reserve reads, decides, and writes back.
func (BrokenStock) Reserve(ctx context.Context, otx order.Tx, l order.Line) error {
	tx, err := stockTx(otx)
	if err != nil {
		return err
	}
	// 1. Read the stock with a plain SELECT. It takes no lock, so every
	//    order placed at the same moment reads the same value: 100 orders
	//    racing for the last 10 units all read 10.
	s, err := tx.ReadStock(ctx, l.ProductID)
	if err != nil {
		return err
	}
	// 2. Decide in the application, on that value. Each order sees enough
	//    stock, because none of the others has written yet (or has written
	//    but not committed, which a plain read does not see).
	if s.Available < l.Quantity {
		return order.OutOfStock(l.ProductID, l.Quantity)
	}
	// 3. Write back the value computed from the read:
	//    SET available = <read> - n. The UPDATE waits for the row lock of
	//    an order that wrote first and then overwrites its result with one
	//    computed from the same stale read, so both orders took "the same"
	//    unit: a lost update. The write never goes below zero (step 2 saw
	//    enough), so no constraint on the column notices.
	return tx.WriteStock(ctx, l.ProductID, s.Available-l.Quantity)
}

// RunTx runs the transaction once.
func (BrokenStock) RunTx(_ context.Context, run func() error) error { return run() }

// OptimisticAttempts bounds how many times one order's transaction runs in
// the optimistic variant before it gives up with order.ErrStockContention.
// On a hot product each round of racing orders sells about one unit (every
// other order's compare-and-set finds the version moved), so an order may
// need about as many attempts as there are units ahead of it; the bound is
// what keeps a request's latency finite under that contention.
const OptimisticAttempts = 30

// OptimisticStock is the optimistic-lock variant (ORDER_STOCK_MODE=
// optimistic): read the stock and its version without a lock, decide, then
// write only if the version is still the one read:
//
//	UPDATE product_stock SET available = <read> - n, version = version + 1
//	WHERE product_id = ? AND version = <read version>
//
// It never oversells: of the orders that read one version, the first to
// write changes the row and the others change nothing (rows affected 0).
// The losers cannot simply read again inside their transaction (REPEATABLE
// READ would show them the same snapshot), so the whole transaction is
// retried (RunTx).
type OptimisticStock struct{}

// Mode is "optimistic".
func (OptimisticStock) Mode() string { return string(Optimistic) }

// Reserve reads, decides, and compares-and-sets.
func (OptimisticStock) Reserve(ctx context.Context, otx order.Tx, l order.Line) error {
	tx, err := stockTx(otx)
	if err != nil {
		return err
	}
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
		return fmt.Errorf("product %d at version %d: %w", l.ProductID, s.Version, app.ErrStockConflict)
	}
	return nil
}

// RunTx runs one order's transaction until it does not lose a
// compare-and-set, at most OptimisticAttempts times, waiting a little
// longer (with jitter) after each loss so the racing orders spread out.
func (OptimisticStock) RunTx(ctx context.Context, run func() error) error {
	for attempt := 1; ; attempt++ {
		err := run()
		if !errors.Is(err, app.ErrStockConflict) {
			return err
		}
		if attempt == OptimisticAttempts {
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
