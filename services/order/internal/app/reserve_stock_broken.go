package app

import (
	"context"

	"github.com/oncemall/oncemall/services/order/internal/order"
)

// reserveBroken is incident 5's broken variant (ORDER_STOCK_MODE=broken,
// lab only): the read-modify-write that oversells. It is reserveFixed's
// decision moved into the application, in three steps; what breaks is the
// gap between the first and the third.
func (a *App) reserveBroken(ctx context.Context, tx order.Tx, l order.Line) error {
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
