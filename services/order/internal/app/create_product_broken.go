package app

import (
	"context"
	"fmt"

	"github.com/oncemall/oncemall/services/order/internal/product"
)

// createProductBroken is incident 3's BROKEN way of creating a product,
// kept to be run and read beside the fix; only a lab variant of
// PRODUCT_COPY_MODE selects it. It checks, then inserts:
//
//  1. the check reads whether a live product has the key, with a plain
//     read that takes no lock, so a product another request is inserting at
//     the same moment is not there yet;
//  2. the insert writes the product, and products has no unique key (logical
//     deletion rules one out), so nothing refuses the second of two requests
//     that both passed step 1: two live products with one name and model.
//
// Sequential requests are refused correctly, which is why it passes every
// single-threaded test.
func (a *App) createProductBroken(ctx context.Context, p product.Product) (product.Product, error) {
	var created product.Product
	err := a.products.InTx(ctx, func(tx product.Tx) error {
		owners, err := tx.LiveOwners(ctx, []product.Key{p.Key()}) // step 1
		if err != nil {
			return err
		}
		if id, ok := owners[p.Key()]; ok {
			return &product.DuplicateError{Key: p.Key(), ExistingID: id}
		}
		ps, err := tx.InsertProducts(ctx, []product.Product{p}) // step 2
		if err != nil {
			return err
		}
		created = ps[0]
		return nil
	})
	if err != nil {
		return product.Product{}, fmt.Errorf("create product %s: %w", p.Key(), err)
	}
	return created, nil
}
