// Package messaging connects the order service to the events it consumes.
package messaging

import (
	"context"
	"fmt"
	"log/slog"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/services/order/internal/app"
)

// PaymentSucceeded applies payment.succeeded to the paid order. It runs as
// an inbox.Handler, so its changes commit with the dedup row.
type PaymentSucceeded struct {
	app   *app.App
	relay app.Waker
	log   *slog.Logger
}

// NewPaymentSucceeded returns the handler; relay is woken after a commit
// that wrote order.paid.
func NewPaymentSucceeded(a *app.App, relay app.Waker, log *slog.Logger) *PaymentSucceeded {
	return &PaymentSucceeded{app: a, relay: relay, log: log}
}

// Handle is the inbox.Handler.
func (h *PaymentSucceeded) Handle(ctx context.Context, tx *gorm.DB, msg inbox.Message) error {
	var ev events.PaymentSucceededV1
	if err := inbox.DecodeJSON(msg, &ev); err != nil {
		return err
	}
	paid, err := h.app.MarkOrderPaid(ctx, tx, ev)
	if err != nil {
		if app.IsPermanent(err) {
			// A payment the order cannot take is money that needs a human
			// (refund or investigation): log loudly, and the dead_message
			// row keeps the event.
			h.log.Error("payment.succeeded conflicts with the order", "order_no", ev.OrderNo, "payment_no", ev.PaymentNo, "message_id", msg.ID, "err", err)
			return inbox.Permanent(err)
		}
		return fmt.Errorf("mark order %s paid: %w", ev.OrderNo, err)
	}
	if paid {
		inbox.OnCommit(ctx, h.relay.Wake)
	} else {
		h.log.Info("payment.succeeded for an order this payment already paid; no effect", "order_no", ev.OrderNo, "payment_no", ev.PaymentNo, "message_id", msg.ID)
	}
	return nil
}
