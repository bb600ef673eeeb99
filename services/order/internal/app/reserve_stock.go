package app

import (
	"context"
	"errors"

	"github.com/oncemall/oncemall/services/order/internal/order"
)

// StockReserver is incident 5's choice: how an order takes the units of
// its lines inside the order's transaction. The fix is FixedStock; the
// lab's broken and optimistic variants are in services/order/lab.
type StockReserver interface {
	// Mode names the way, for the order_stock_decisions_total metric
	// ("fixed", "broken", "optimistic").
	Mode() string
	// Reserve takes l's units in tx. Too few is order.ErrOutOfStock
	// (order.OutOfStock); ErrStockConflict means the transaction must run
	// again (see RunTx).
	Reserve(ctx context.Context, tx order.Tx, l order.Line) error
	// RunTx runs one order's transaction, run: once, or again while it
	// fails with ErrStockConflict, giving up with an error wrapping
	// order.ErrStockContention.
	RunTx(ctx context.Context, run func() error) error
}

// ErrStockConflict is a lost compare-and-set: the stock moved between the
// transaction's read and its write. Nothing is wrong with the order; the
// transaction rolls back and StockReserver.RunTx runs it again.
var ErrStockConflict = errors.New("stock version changed since it was read")

// reserveStock writes the reservations of order orderNo inside tx, then
// takes the units of every line, in product order, with the StockReserver
// (rows first, units last: see placeInTx). A line that cannot get its
// units fails the whole order with order.ErrOutOfStock, and the
// transaction's rollback takes back the reservations and gives back what
// the lines before it took.
func (a *App) reserveStock(ctx context.Context, tx order.Tx, orderNo string, lines []order.Line) error {
	sorted := order.ByProduct(lines)
	if err := tx.AddReservations(ctx, orderNo, sorted, a.now()); err != nil {
		return err
	}
	mode := a.stock.Mode()
	for _, l := range sorted {
		err := a.stock.Reserve(ctx, tx, l)
		switch {
		case errors.Is(err, order.ErrOutOfStock):
			a.m.stock.WithLabelValues(mode, "out_of_stock").Inc()
			return err
		case errors.Is(err, ErrStockConflict):
			a.m.stock.WithLabelValues(mode, "conflict").Inc()
			return err
		case err != nil:
			return err
		}
	}
	a.m.stock.WithLabelValues(mode, "reserved").Add(float64(len(sorted)))
	return nil
}

// inStockTx runs fn in one orders transaction, through the StockReserver's
// RunTx.
func (a *App) inStockTx(ctx context.Context, fn func(order.Tx) error) error {
	err := a.stock.RunTx(ctx, func() error { return a.orders.InTx(ctx, fn) })
	if errors.Is(err, order.ErrStockContention) {
		a.m.stock.WithLabelValues(a.stock.Mode(), "contention").Inc()
	}
	return err
}
