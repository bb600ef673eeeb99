package app

import (
	"context"
	"fmt"

	"github.com/oncemall/oncemall/services/order/internal/product"
)

// MaxTemplatesPerRequest bounds one CreateTemplates call.
const MaxTemplatesPerRequest = 10000

// CreateTemplates validates and stores templates, all or none.
func (a *App) CreateTemplates(ctx context.Context, in []CreateProduct) ([]product.Template, error) {
	if len(in) == 0 || len(in) > MaxTemplatesPerRequest {
		return nil, product.Invalidf("give 1 to %d templates", MaxTemplatesPerRequest)
	}
	ts := make([]product.Template, len(in))
	for i, t := range in {
		var err error
		if ts[i], err = product.NewTemplate(t.Brand, t.Name, t.Model, t.Price); err != nil {
			return nil, fmt.Errorf("template %d: %w", i, err)
		}
	}
	return a.products.CreateTemplates(ctx, ts)
}
