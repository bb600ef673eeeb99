package lab

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/oncemall/oncemall/services/order/internal/product"
)

// ProductTx is what incident 3's check-then-insert needs of a catalog
// transaction beyond product.Tx: the store's transaction has it, the
// domain's interface does not carry it.
type ProductTx interface {
	// LiveOwners returns, for each key that has live products, the oldest
	// one's id, with a plain read that takes no lock: a product another
	// transaction is inserting at the same time is not there.
	LiveOwners(ctx context.Context, keys []product.Key) (map[product.Key]uint64, error)
	// InsertProducts inserts ps without keys and returns them with their
	// ids.
	InsertProducts(ctx context.Context, ps []product.Product) ([]product.Product, error)
}

func productTx(tx product.Tx) (ProductTx, error) {
	p, ok := tx.(ProductTx)
	if !ok {
		return nil, fmt.Errorf("lab: the catalog transaction %T cannot insert products without keys", tx)
	}
	return p, nil
}

// CheckThenInsert is incident 3's BROKEN way of creating products
// (PRODUCT_COPY_MODE=broken, and orderly, which is the same code consumed
// by one copy worker), kept to be run and read beside the fix
// (app.KeyedProducts). It checks, then inserts:
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
type CheckThenInsert struct{}

// Create checks then inserts p.
func (CheckThenInsert) Create(ctx context.Context, products product.Store, p product.Product) (product.Product, error) {
	var created product.Product
	err := products.InTx(ctx, func(ptx product.Tx) error {
		tx, err := productTx(ptx)
		if err != nil {
			return err
		}
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

// CopyChunk is the broken batch copy: the same two steps over a chunk. Two workers copying the same products at once (the
// upstream job sent every request twice) both find them missing in step 1
// and both insert them in step 2: duplicate live products. With one worker
// (the orderly variant) no two copies overlap and it holds, slowly, and for
// batch copies only: a POST /products racing a copy can still duplicate.
func (CheckThenInsert) CopyChunk(ctx context.Context, ptx product.Tx, plan product.ChunkPlan, onDup product.OnDuplicate) (product.ChunkResult, error) {
	tx, err := productTx(ptx)
	if err != nil {
		return product.ChunkResult{}, err
	}
	existing, err := tx.LiveOwners(ctx, plan.Keys()) // step 1
	if err != nil {
		return product.ChunkResult{}, err
	}
	meetTwin(ctx, fmt.Sprint(plan.Keys()))
	if dups := plan.Duplicates(existing, nil); onDup == product.FailOnDuplicate && len(dups) > 0 {
		return plan.FailAll(dups), nil
	}
	created, err := tx.InsertProducts(ctx, plan.Missing(existing)) // step 2
	if err != nil {
		return product.ChunkResult{}, err
	}
	return plan.Result(existing, created), nil
}

// twins holds, per chunk of products, the chunk that did step 1 first and
// waits for its twin.
var twins sync.Map // string → chan struct{}

// twinWait bounds how long a chunk waits for its twin: a copy sent once
// (or the orderly variant's one worker) goes on after it.
const twinWait = 50 * time.Millisecond

// meetTwin holds a chunk between its two steps until the other copy of the
// same products has done step 1 too, or twinWait has passed: the
// interleaving the incident's consumers met at peak, on every run of the
// lab instead of on some.
func meetTwin(ctx context.Context, key string) {
	ch := make(chan struct{})
	if first, loaded := twins.LoadOrStore(key, ch); loaded {
		twins.Delete(key)
		close(first.(chan struct{}))
		return
	}
	t := time.NewTimer(twinWait)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
		twins.CompareAndDelete(key, ch)
	case <-ctx.Done():
		twins.CompareAndDelete(key, ch)
	}
}
