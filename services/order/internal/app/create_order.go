package app

import (
	"context"
	"fmt"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/services/order/internal/order"
)

// CreateOrder is the input of the CreateOrder use case. Give Items or
// Amount, not both.
type CreateOrder struct {
	UserID   uint64
	Items    []order.Item
	Amount   int64
	CouponID *uint64
}

// TxHook runs last inside CreateOrder's transaction, after the order and
// its event are written, with the order as created; an error rolls the whole
// transaction back. The HTTP handler uses it to build its response and
// complete the Idempotency-Key record atomically with the order.
type TxHook func(ctx context.Context, tx order.Tx, o order.Order) error

// OrderCreatedEventID is the outbox message id of an order's order.created
// event: derived from the order number, so the event can never be written
// twice for one order.
func OrderCreatedEventID(orderNo string) string { return "order-created-" + orderNo }

// CreateOrder validates cmd and, in one transaction, inserts the order (in
// WAIT_PAY), its order.created event and whatever the hooks write (they run
// last, in order). Invalid input returns order.ErrInvalid with nothing
// written.
func (a *App) CreateOrder(ctx context.Context, cmd CreateOrder, hooks ...TxHook) (order.Order, error) {
	now := a.now()
	no, err := newOrderNo(now)
	if err != nil {
		return order.Order{}, err
	}
	o, err := order.New(no, cmd.UserID, cmd.Items, cmd.Amount, cmd.CouponID, now)
	if err != nil {
		return order.Order{}, err
	}
	err = a.orders.InTx(ctx, func(tx order.Tx) error {
		if err := tx.Insert(ctx, o); err != nil {
			return err
		}
		if err := tx.AddEvent(ctx, orderCreated(o)); err != nil {
			return err
		}
		for _, h := range hooks {
			if err := h(ctx, tx, o); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return order.Order{}, fmt.Errorf("create order: %w", err)
	}
	return o, nil
}

// orderCreated is o's order.created event.
func orderCreated(o order.Order) events.Event {
	return events.Event{ID: OrderCreatedEventID(o.No), Subject: events.OrderCreated, Payload: events.OrderCreatedV1{
		OrderNo: o.No, UserID: o.UserID, Amount: o.Amount, CouponID: o.CouponID, CreatedAt: o.CreatedAt,
	}}
}
