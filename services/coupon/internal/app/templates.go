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

// Template returns one template. Templates never change once created, so
// each is read from the database once and then served from memory: a lock
// and a deduction both need their coupon's template, and reading it again
// was a round trip on every purchase.
func (a *App) Template(ctx context.Context, id uint64) (coupon.Template, error) {
	if t, ok := a.templates.Load(id); ok {
		return t.(coupon.Template), nil
	}
	t, err := a.store.Template(ctx, id)
	if err != nil {
		return coupon.Template{}, err
	}
	a.templates.Store(id, t)
	return t, nil
}
