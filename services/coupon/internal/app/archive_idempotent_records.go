package app

import (
	"context"
	"fmt"
)

// ArchiveIdempotentRecords moves every biz_idempotent_record row past its
// expire_time to the archive table, batch by batch, and reports how many
// moved. A record only has to outlive the retries that could repeat its
// effect; past that, it is history.
func (a *App) ArchiveIdempotentRecords(ctx context.Context) (int, error) {
	total := 0
	for ctx.Err() == nil {
		n, err := a.store.ArchiveIdempotentRecords(ctx, a.now(), a.cfg.ArchiveBatch)
		total += n
		a.metrics.recordsArchived.Add(float64(n))
		if err != nil {
			return total, fmt.Errorf("archive idempotent records: %w", err)
		}
		if n < a.cfg.ArchiveBatch {
			break
		}
	}
	return total, nil
}
