package lab

import (
	"context"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/services/payment/internal/messaging"
)

// HandOrderCancelled gives msg, an order.cancelled event, to the payment
// service's consumer in a transaction of its own (the one the inbox would
// open), for a lab that hands events from one service's outbox to another
// without a relay (incident 6). It returns the consumer's error.
func (r *Rig) HandOrderCancelled(ctx context.Context, msg inbox.Message) error {
	c := messaging.OrderCancelled(r.App, r.Store)
	return r.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return c.Handle(ctx, tx, msg) })
}

// Findings runs the payment service's reconciler and returns its counts by
// kind (payment.Kinds): what payment_reconcile_findings would show.
func (r *Rig) Findings(ctx context.Context) (map[string]int, error) {
	rep, err := r.App.Reconcile(ctx)
	if err != nil {
		return nil, err
	}
	return rep.Counts(), nil
}
