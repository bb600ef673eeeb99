package app

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/services/order/internal/product"
)

// StartCopy accepts a batch copy: it resolves the templates, then stores the
// job, its chunks and one product.batch_copy event per chunk in one
// transaction, so the job exists if and only if its work is queued. The copy
// itself runs on the workers (CopyChunk). A request id seen before returns
// the job it created (existed = true).
func (a *App) StartCopy(ctx context.Context, r product.CopyRequest) (_ product.CopyJob, existed bool, err error) {
	r.TargetBrand = strings.TrimSpace(r.TargetBrand)
	if err := r.Validate(); err != nil {
		return product.CopyJob{}, false, err
	}
	onDup, _ := product.ParseOnDuplicate(string(r.OnDuplicate))
	ids, missing, err := a.products.TemplateIDs(ctx, r)
	if err != nil {
		return product.CopyJob{}, false, err
	}
	if len(missing) > 0 {
		return product.CopyJob{}, false, product.Invalidf("unknown template ids: %s", formatIDs(missing, 20))
	}
	if len(ids) == 0 {
		return product.CopyJob{}, false, product.Invalidf("brand %q has no templates to copy", r.SourceBrand)
	}
	job := product.CopyJob{
		ID:          uuid.NewString(),
		RequestID:   r.RequestID,
		TargetBrand: r.TargetBrand,
		OnDuplicate: onDup,
		Total:       len(ids),
		CreatedAt:   a.now(),
	}
	size := a.cfg.ChunkSize
	if onDup == product.FailOnDuplicate {
		// All or nothing is one transaction over the whole batch, hence one
		// message; its size is bounded so that transaction stays short.
		if len(ids) > a.cfg.MaxAllOrNothing {
			return product.CopyJob{}, false, product.Invalidf("an all-or-nothing batch copies at most %d products, this one has %d: split it or use on_duplicate=skip", a.cfg.MaxAllOrNothing, len(ids))
		}
		size = len(ids)
	}
	chunks := product.SplitChunks(job, ids, size)
	job.Chunks = len(chunks)
	err = a.products.InTx(ctx, func(tx product.Tx) error {
		if err := tx.InsertCopyJob(ctx, job, chunks); err != nil {
			return err
		}
		for _, c := range chunks {
			if err := tx.AddEvent(ctx, events.Event{ID: c.MessageID(), Subject: events.ProductBatchCopy, Payload: c}); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, product.ErrJobExists) {
		// The caller resubmitted a request id: answer with the job it
		// created.
		existed = true
		job, err = a.products.CopyJobByRequest(ctx, r.RequestID)
	}
	if err != nil {
		return product.CopyJob{}, false, fmt.Errorf("start copy for request %q: %w", r.RequestID, err)
	}
	a.log.InfoContext(ctx, "batch copy accepted", "job_id", job.ID, "request_id", job.RequestID, "total", job.Total, "chunks", job.Chunks, "existed", existed)
	return job, existed, nil
}

func formatIDs(ids []uint64, max int) string {
	parts := make([]string, 0, min(len(ids), max)+1)
	for i, id := range ids {
		if i == max {
			parts = append(parts, fmt.Sprintf("and %d more", len(ids)-max))
			break
		}
		parts = append(parts, fmt.Sprint(id))
	}
	return strings.Join(parts, ", ")
}
