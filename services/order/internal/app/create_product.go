package app

import (
	"context"

	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/order/internal/product"
)

// CreateProduct is the input of POST /products, and of one template.
type CreateProduct struct {
	Brand string
	Name  string
	Model string
	Price int64
}

// CreateProduct validates and creates a product, the way Config.ProductCopy
// says; a live product with the same name and model makes it fail with
// *product.DuplicateError naming that product.
func (a *App) CreateProduct(ctx context.Context, cmd CreateProduct) (product.Product, error) {
	p, err := product.NewProduct(cmd.Brand, cmd.Name, cmd.Model, cmd.Price)
	if err != nil {
		return product.Product{}, err
	}
	if a.cfg.ProductCopy == variant.Fixed {
		return a.createProductFixed(ctx, p)
	}
	return a.createProductBroken(ctx, p)
}
