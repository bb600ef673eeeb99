package app

import (
	"context"

	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// Reconcile lists the broken invariants of the deduction: orders deducted more
// than once, USED coupons without a ledger row, and ledger rows whose coupon
// is UNUSED. An empty list means the ledger and the coupons agree.
func (a *App) Reconcile(ctx context.Context) ([]coupon.Anomaly, error) {
	return a.store.Reconcile(ctx)
}
