package app

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/outbox"
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

// OrderCreatedEventID is the outbox message id of an order's order.created
// event: derived from the order number, so the event can never be written
// twice for one order.
func OrderCreatedEventID(orderNo string) string { return "order-created-" + orderNo }

// CreateOrder validates cmd and, in one transaction, inserts the order (in
// WAIT_PAY), its order.created event and whatever the hooks write (they run
// last, in order); then wakes the relay. Invalid input returns
// order.ErrInvalid with nothing written.
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
	msg, err := outbox.JSON(OrderCreatedEventID(o.No), a.subjectPrefix+events.OrderCreated, events.OrderCreatedV1{
		OrderNo: o.No, UserID: o.UserID, Amount: o.Amount, CouponID: o.CouponID, CreatedAt: o.CreatedAt,
	})
	if err != nil {
		return order.Order{}, err
	}
	err = a.store.Transaction(ctx, func(tx *gorm.DB) error {
		if err := a.store.Insert(tx, o); err != nil {
			return err
		}
		if err := outbox.Add(tx, msg); err != nil {
			return err
		}
		for _, h := range hooks {
			if h == nil {
				continue
			}
			if err := h(tx, o); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return order.Order{}, fmt.Errorf("create order: %w", err)
	}
	a.relay.Wake()
	return o, nil
}
