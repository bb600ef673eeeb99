package app

import (
	"context"

	"github.com/oncemall/oncemall/services/order/internal/product"
)

// CreateProduct is the input of POST /products, and of one template.
type CreateProduct struct {
	Brand string
	Name  string
	Model string
	Price int64
}

// ProductCreator is incident 3's choice: how products are created, one
// (POST /admin/products) or a batch-copy chunk at a time. The fix is
// KeyedProducts; the lab's check-then-insert is in services/order/lab.
type ProductCreator interface {
	// Create creates p in a transaction of products; a live product with
	// the same key is *product.DuplicateError naming it.
	Create(ctx context.Context, products product.Store, p product.Product) (product.Product, error)
	// CopyChunk creates the products of plan missing from the catalog,
	// inside tx, the chunk message's transaction; with
	// product.FailOnDuplicate one duplicate fails the whole chunk.
	CopyChunk(ctx context.Context, tx product.Tx, plan product.ChunkPlan, onDup product.OnDuplicate) (product.ChunkResult, error)
}

// CreateProduct validates and creates a product with the ProductCreator;
// a live product with the same name and model makes it fail with
// *product.DuplicateError naming that product.
func (a *App) CreateProduct(ctx context.Context, cmd CreateProduct) (product.Product, error) {
	p, err := product.NewProduct(cmd.Brand, cmd.Name, cmd.Model, cmd.Price)
	if err != nil {
		return product.Product{}, err
	}
	return a.creator.Create(ctx, a.products, p)
}
