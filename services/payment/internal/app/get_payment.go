package app

import (
	"context"
	"fmt"

	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// GetPayment returns the payment with out_trade_no to the owner of its
// order, userID; to anyone else it does not exist (ErrNotFound), so that a
// payment number reveals nothing to a caller it does not belong to.
func (a *App) GetPayment(ctx context.Context, userID uint64, outTradeNo string) (payment.Payment, error) {
	p, err := a.store.Get(ctx, outTradeNo)
	if err == nil && (p.UserID == 0 || p.UserID != userID) {
		err = payment.ErrNotFound
	}
	if err != nil {
		return payment.Payment{}, fmt.Errorf("get payment %s: %w", outTradeNo, err)
	}
	return p, nil
}
