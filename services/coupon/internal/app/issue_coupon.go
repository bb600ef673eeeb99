package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// IssueCoupon gives userID a new UNUSED coupon of templateID, or
// coupon.ErrUnknownTemplate when there is no such template.
func (a *App) IssueCoupon(ctx context.Context, templateID, userID uint64) (coupon.Coupon, error) {
	t, err := a.Template(ctx, templateID)
	if errors.Is(err, coupon.ErrNotFound) {
		return coupon.Coupon{}, fmt.Errorf("%w %d", coupon.ErrUnknownTemplate, templateID)
	}
	if err != nil {
		return coupon.Coupon{}, fmt.Errorf("issue coupon: %w", err)
	}
	c, err := coupon.Issue(t, userID, a.now())
	if err != nil {
		return coupon.Coupon{}, err
	}
	if err := a.store.CreateCoupon(ctx, &c); err != nil {
		return coupon.Coupon{}, fmt.Errorf("issue coupon: %w", err)
	}
	return c, nil
}

// Coupon returns one coupon.
func (a *App) Coupon(ctx context.Context, id uint64) (coupon.Coupon, error) {
	return a.store.Coupon(ctx, id)
}

// UserCoupons lists a user's coupons.
func (a *App) UserCoupons(ctx context.Context, userID uint64) ([]coupon.Coupon, error) {
	return a.store.UserCoupons(ctx, userID)
}
