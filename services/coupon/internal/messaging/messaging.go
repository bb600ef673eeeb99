// Package messaging connects the coupon service to the events it consumes:
// each function declares a consumer whose handler decodes the pkg/events
// payload, converts it to the use case's input and calls the use case in the
// inbox's transaction, viewed as a coupon.Tx (platform.Bind makes the view
// with the store's InboxTx). A payload that cannot be read, or that the
// domain refuses (coupon.IsPermanent), is dead-lettered at once; any other
// error is redelivered.
package messaging

import (
	"context"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// The durable consumer names, also the inbox's deduplication scopes.
const (
	OrderPaidConsumer      = "coupon-order-paid"
	OrderCancelledConsumer = "coupon-order-cancelled"
)

// OrderPaid consumes order.paid: it deducts the coupon and lands the event
// (one row in coupon_message) in the inbox's transaction, or lands it for
// an attempt after the commit; the retry job takes what the attempt left
// PENDING (app.ReceiveOrderPaid).
func OrderPaid(a *app.App) platform.ConsumerOf[coupon.Tx] {
	return consumer(OrderPaidConsumer, events.OrderPaid, func(ctx context.Context, tx coupon.Tx, id string, e events.OrderPaidV1) error {
		return a.ReceiveOrderPaid(ctx, tx, app.OrderPaid{MessageID: id, OrderNo: e.OrderNo, UserID: e.UserID, CouponID: couponID(e.CouponID)})
	})
}

// OrderCancelled consumes order.cancelled: it releases the cancelled
// order's coupon lock, once however often the event is delivered (the inbox
// deduplicates the message id; the release is conditional on the order
// holding the lock).
func OrderCancelled(a *app.App) platform.ConsumerOf[coupon.Tx] {
	return consumer(OrderCancelledConsumer, events.OrderCancelled, func(ctx context.Context, tx coupon.Tx, id string, e events.OrderCancelledV1) error {
		return a.ReleaseCancelledOrder(ctx, tx, app.OrderCancelled{MessageID: id, OrderNo: e.OrderNo, Reason: e.Reason, CouponID: couponID(e.CouponID)})
	})
}

// consumer declares the consumer name of subject, whose payload E is
// handed to apply.
func consumer[E any](name, subject string, apply func(ctx context.Context, tx coupon.Tx, messageID string, e E) error) platform.ConsumerOf[coupon.Tx] {
	return platform.ConsumerOf[coupon.Tx]{Name: name, Subject: subject, Handle: inbox.JSON(apply, coupon.IsPermanent)}
}

// couponID is an event's coupon, 0 for an order without one.
func couponID(id *uint64) uint64 {
	if id == nil {
		return 0
	}
	return *id
}
