package app

import (
	"context"
	"errors"

	"github.com/oncemall/oncemall/services/order/internal/product"
)

// copyAttempts bounds how often a chunk reads the keys again after losing a
// race for one; each round sees the winners, so it converges quickly, and a
// chunk that still loses is redelivered.
const copyAttempts = 5

// CopyChunk is the fix of incident 3 for a batch copy: the chunk's missing products are
// inserted with their keys (Tx.InsertKeyed), whose unique index admits one
// live product per (name, model) whatever the concurrency. A chunk that
// loses a race for a key has its insert undone, reads the keys again and
// skips the winners.
func (KeyedProducts) CopyChunk(ctx context.Context, tx product.Tx, plan product.ChunkPlan, onDup product.OnDuplicate) (product.ChunkResult, error) {
	keys := plan.Keys()
	for attempt := range copyAttempts {
		// The first look is a plain read. After a lost race the winner has
		// committed, but a snapshot taken earlier would not show it, so the
		// later looks read the latest committed keys.
		existing, err := tx.KeyOwners(ctx, keys, attempt > 0)
		if err != nil {
			return product.ChunkResult{}, err
		}
		if dups := plan.Duplicates(existing, nil); onDup == product.FailOnDuplicate && len(dups) > 0 {
			return plan.FailAll(dups), nil
		}
		created, err := tx.InsertKeyed(ctx, plan.Missing(existing))
		if errors.Is(err, product.ErrKeyTaken) {
			continue
		}
		if err != nil {
			return product.ChunkResult{}, err
		}
		return plan.Result(existing, created), nil
	}
	return product.ChunkResult{}, errors.New("keys kept changing hands, giving up for this delivery")
}
