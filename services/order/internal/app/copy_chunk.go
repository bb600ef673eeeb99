package catalogapp

import (
	"context"

	"github.com/oncemall/oncemall/services/order/internal/catalog"
)

// CopyChunk runs a worker's share of a batch copy through cs, the store bound
// to the transaction of the message that carries the chunk.
func (a *App) CopyChunk(ctx context.Context, cs catalog.ChunkStore, c catalog.CopyChunk) error {
	res, done, err := cs.CopyChunk(ctx, c)
	if err != nil {
		return err
	}
	if !done {
		a.log.InfoContext(ctx, "batch copy chunk already processed", "job_id", c.JobID, "seq", c.Seq)
		return nil
	}
	// Counted before the message's transaction commits: a commit that fails
	// afterwards gets the chunk redelivered and counted again, so the metric
	// can run slightly ahead of the database. The job's counters cannot.
	a.metrics.copied.WithLabelValues("created").Add(float64(res.Created))
	a.metrics.copied.WithLabelValues("skipped").Add(float64(res.Skipped))
	a.metrics.copied.WithLabelValues("failed").Add(float64(res.Failed))
	if res.Error != "" {
		a.log.WarnContext(ctx, "batch copy chunk failed", "job_id", c.JobID, "seq", c.Seq, "error", res.Error)
	}
	return nil
}
