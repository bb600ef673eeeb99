package app

import (
	"context"

	"github.com/oncemall/oncemall/services/order/internal/order"
)

// FixedStock is incident 5's fix. It takes a line's units with one
// conditional decrement,
//
//	UPDATE product_stock SET available = available - n
//	WHERE product_id = ? AND available >= n
//
// and checks rows affected: 1 took the units, 0 means too few. The
// database evaluates the condition on the row's latest committed value
// while it holds the row's lock, so there is no moment between reading the
// stock and writing it for another order to slip into: of 100 orders for
// the last 10 units, 10 find available >= 1 and 90 find 0. The lock is held
// until the order's transaction ends, and that is what serialises the
// orders of one hot product.
type FixedStock struct{}

// Mode is "fixed".
func (FixedStock) Mode() string { return "fixed" }

// Reserve takes l's units with the conditional decrement.
func (FixedStock) Reserve(ctx context.Context, tx order.Tx, l order.Line) error {
	took, err := tx.DecrementStock(ctx, l.ProductID, l.Quantity)
	if err != nil {
		return err
	}
	if !took {
		return order.OutOfStock(l.ProductID, l.Quantity)
	}
	return nil
}

// RunTx runs the transaction once: the decrement never loses a race.
func (FixedStock) RunTx(_ context.Context, run func() error) error { return run() }
