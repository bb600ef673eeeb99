package app

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/oncemall/oncemall/services/order/internal/product"
)

// KeyedProducts is the fix of incident 3: each product and its key are
// inserted together (Tx.InsertKeyed), and the key's unique index admits one
// live product per (name, model) whatever the concurrency or the entry
// point (a batch copy inserts keys the same way). The loser of a race gets
// the duplicate key once the winner commits, reads the winner with a
// locking read, which sees it, and answers with its id. A batch copy's
// chunk does the same (copy_chunk_fixed.go).
type KeyedProducts struct{}

// Create inserts p with its key.
func (KeyedProducts) Create(ctx context.Context, products product.Store, p product.Product) (product.Product, error) {
	var created product.Product
	err := retry(ctx, func() error {
		return products.InTx(ctx, func(tx product.Tx) error {
			ps, err := tx.InsertKeyed(ctx, []product.Product{p})
			if !errors.Is(err, product.ErrKeyTaken) {
				if err == nil {
					created = ps[0]
				}
				return err
			}
			owners, err := tx.KeyOwners(ctx, []product.Key{p.Key()}, true)
			if err != nil {
				return err
			}
			if id, ok := owners[p.Key()]; ok {
				return &product.DuplicateError{Key: p.Key(), ExistingID: id}
			}
			// The product holding the key was deleted between the two
			// statements: the key is free again.
			return errKeyFreed
		})
	})
	if err != nil {
		return product.Product{}, fmt.Errorf("create product %s: %w", p.Key(), err)
	}
	return created, nil
}

// retryAttempts bounds the runs of a transaction that was chosen as a
// deadlock victim (concurrent inserts of a key whose dedup row was just
// deleted can deadlock on it), or that lost a key to a product deleted again
// before it could be named.
const retryAttempts = 5

// errKeyFreed: the product holding a key was deleted before the transaction
// that lost the key to it could name it.
var errKeyFreed = errors.New("the product holding the key was deleted meanwhile")

// retry runs fn, a whole transaction, again while it fails with
// product.ErrDeadlock or errKeyFreed, at most retryAttempts times. It waits
// a little longer after each failure, with jitter, so the transactions that
// collided do not collide again in step; the next run sees the one that
// won.
func retry(ctx context.Context, fn func() error) error {
	var err error
	for attempt := range retryAttempts {
		if err = fn(); !errors.Is(err, product.ErrDeadlock) && !errors.Is(err, errKeyFreed) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(time.Duration(attempt+1) * time.Duration(1+rand.IntN(5)) * time.Millisecond):
		}
	}
	return fmt.Errorf("gave up after %d attempts: %w", retryAttempts, err)
}
