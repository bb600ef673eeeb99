package app

import (
	"context"
	"errors"

	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/order/internal/order"
)

// reserveStock writes the reservations of order orderNo inside tx, then
// takes the units of every line, in product order, the way Config.Stock
// says (rows first, units last: see placeInTx). A line that cannot get its
// units fails the whole order with order.ErrOutOfStock, and the
// transaction's rollback takes back the reservations and gives back what
// the lines before it took.
func (a *App) reserveStock(ctx context.Context, tx order.Tx, orderNo string, lines []order.Line) error {
	sorted := order.ByProduct(lines)
	if err := tx.AddReservations(ctx, orderNo, sorted, a.now()); err != nil {
		return err
	}
	for _, l := range sorted {
		var err error
		switch a.cfg.Stock {
		case variant.Broken:
			err = a.reserveBroken(ctx, tx, l)
		case Optimistic:
			err = a.reserveOptimistic(ctx, tx, l)
		default:
			err = a.reserveFixed(ctx, tx, l)
		}
		switch {
		case errors.Is(err, order.ErrOutOfStock):
			a.m.stock.WithLabelValues(string(a.cfg.Stock), "out_of_stock").Inc()
			return err
		case errors.Is(err, errSwapLost):
			a.m.stock.WithLabelValues(string(a.cfg.Stock), "conflict").Inc()
			return err
		case err != nil:
			return err
		}
	}
	a.m.stock.WithLabelValues(string(a.cfg.Stock), "reserved").Add(float64(len(sorted)))
	return nil
}

// inStockTx runs fn in one orders transaction, retried when the optimistic
// stock variant lost its compare-and-set (see retrySwaps); the other
// variants run it once.
func (a *App) inStockTx(ctx context.Context, fn func(order.Tx) error) error {
	run := func() error { return a.orders.InTx(ctx, fn) }
	if a.cfg.Stock == Optimistic {
		return a.retrySwaps(ctx, run)
	}
	return run()
}
