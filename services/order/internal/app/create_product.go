package catalogapp

import (
	"context"

	"github.com/oncemall/oncemall/services/order/internal/catalog"
)

// CreateProduct is the input of POST /products.
type CreateProduct struct {
	Brand string
	Name  string
	Model string
	Price int64
}

// CreateProduct validates and creates a product; a live product with the same
// name and model makes it fail with *catalog.DuplicateError.
func (a *App) CreateProduct(ctx context.Context, cmd CreateProduct) (catalog.Product, error) {
	p, err := catalog.NewProduct(cmd.Brand, cmd.Name, cmd.Model, cmd.Price)
	if err != nil {
		return catalog.Product{}, err
	}
	return a.store.CreateProduct(ctx, p)
}
