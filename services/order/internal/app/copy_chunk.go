package app

import (
	"context"
	"fmt"

	"github.com/oncemall/oncemall/services/order/internal/product"
)

// CopyChunk runs a worker's share of a batch copy inside tx, the
// transaction of the message that carries the chunk, so the products it
// creates, the chunk's counters and the message's processed-message row
// commit together. It locks the chunk, leaves one that an earlier delivery
// processed alone (false), creates the products with the ProductCreator, and records the chunk's result (true). A chunk whose job does not
// exist is product.ErrNotFound, one with an unknown duplicate policy
// product.ErrInvalid: no redelivery will change either.
func (a *App) CopyChunk(ctx context.Context, tx product.Tx, c product.CopyChunk) (bool, error) {
	pending, err := tx.LockChunk(ctx, c.JobID, c.Seq)
	if err != nil {
		return false, err
	}
	if !pending {
		a.log.InfoContext(ctx, "batch copy chunk already processed", "job_id", c.JobID, "seq", c.Seq)
		return false, nil
	}
	onDup, err := product.ParseOnDuplicate(c.OnDuplicate)
	if err != nil {
		return false, fmt.Errorf("chunk %s/%d: %w", c.JobID, c.Seq, err)
	}
	templates, err := tx.Templates(ctx, c.TemplateIDs)
	if err != nil {
		return false, err
	}
	items, missing := c.Items(templates)
	plan := product.PlanChunk(items)
	res, err := a.creator.CopyChunk(ctx, tx, plan, onDup)
	if err != nil {
		return false, fmt.Errorf("copy chunk %s/%d: %w", c.JobID, c.Seq, err)
	}
	res.AddMissing(missing)
	if err := tx.FinishChunk(ctx, c, res); err != nil {
		return false, err
	}
	// Counted before the message's transaction commits: a commit that fails
	// afterwards gets the chunk redelivered and counted again, so the metric
	// can run slightly ahead of the database. The job's counters cannot.
	a.m.copied.WithLabelValues("created").Add(float64(res.Created))
	a.m.copied.WithLabelValues("skipped").Add(float64(res.Skipped))
	a.m.copied.WithLabelValues("failed").Add(float64(res.Failed))
	if res.Error != "" {
		a.log.WarnContext(ctx, "batch copy chunk failed", "job_id", c.JobID, "seq", c.Seq, "error", res.Error)
	}
	return true, nil
}
