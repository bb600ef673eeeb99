package app

import (
	"context"
	"fmt"

	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// GetPayment returns the payment with out_trade_no.
func (a *App) GetPayment(ctx context.Context, outTradeNo string) (payment.Payment, error) {
	p, err := a.store.Get(ctx, outTradeNo)
	if err != nil {
		return payment.Payment{}, fmt.Errorf("get payment %s: %w", outTradeNo, err)
	}
	return p, nil
}
