package app

import (
	"context"
	"fmt"

	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// CreateTemplate validates and stores a new coupon template. A template
// that names no validity gets coupon.DefaultValidDays.
func (a *App) CreateTemplate(ctx context.Context, t coupon.Template) (coupon.Template, error) {
	if t.ValidDays == 0 {
		t.ValidDays = coupon.DefaultValidDays
	}
	if err := t.Validate(); err != nil {
		return coupon.Template{}, err
	}
	t.ID = 0
	t.CreatedAt = a.now()
	if err := a.store.CreateTemplate(ctx, &t); err != nil {
		return coupon.Template{}, fmt.Errorf("create template: %w", err)
	}
	return t, nil
}

// Template returns one template.
func (a *App) Template(ctx context.Context, id uint64) (coupon.Template, error) {
	return a.store.Template(ctx, id)
}
