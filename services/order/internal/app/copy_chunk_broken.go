package app

import (
	"context"

	"github.com/oncemall/oncemall/services/order/internal/product"
)

// copyChunkBroken is incident 3's BROKEN batch copy, the story's consumer,
// kept to be run and read beside the fix; only a lab variant of
// PRODUCT_COPY_MODE selects it. It checks, then inserts:
//
//  1. it reads which of the chunk's (name, model) have a live product, with
//     a plain read that takes no lock;
//  2. it inserts the others, and products has no unique key (logical
//     deletion rules one out).
//
// Two workers copying the same products at once (the upstream job sent
// every request twice) both find them missing in step 1 and both insert
// them in step 2: duplicate live products. With one worker (the orderly
// variant) no two copies overlap and it holds, slowly, and for batch copies
// only: a POST /products racing a copy can still duplicate.
func copyChunkBroken(ctx context.Context, tx product.Tx, plan product.ChunkPlan, onDup product.OnDuplicate) (product.ChunkResult, error) {
	existing, err := tx.LiveOwners(ctx, plan.Keys()) // step 1
	if err != nil {
		return product.ChunkResult{}, err
	}
	if dups := plan.Duplicates(existing, nil); onDup == product.FailOnDuplicate && len(dups) > 0 {
		return plan.FailAll(dups), nil
	}
	created, err := tx.InsertProducts(ctx, plan.Missing(existing)) // step 2
	if err != nil {
		return product.ChunkResult{}, err
	}
	return plan.Result(existing, created), nil
}
