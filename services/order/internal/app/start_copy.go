package catalogapp

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/oncemall/oncemall/services/order/internal/catalog"
)

// StartCopy accepts a batch copy: it resolves the templates, then stores the
// job, its chunks and one queued message per chunk in one transaction, and
// wakes the relay. The copy itself runs on the workers. A request id seen
// before returns the job it created (existed = true).
func (a *App) StartCopy(ctx context.Context, r catalog.CopyRequest) (_ catalog.CopyJob, existed bool, err error) {
	r.TargetBrand = strings.TrimSpace(r.TargetBrand)
	if err := r.Validate(); err != nil {
		return catalog.CopyJob{}, false, err
	}
	onDup, _ := catalog.ParseOnDuplicate(string(r.OnDuplicate))
	ids, missing, err := a.store.TemplateIDs(ctx, r)
	if err != nil {
		return catalog.CopyJob{}, false, err
	}
	if len(missing) > 0 {
		return catalog.CopyJob{}, false, catalog.ErrInvalidf("unknown template ids: %s", formatIDs(missing, 20))
	}
	if len(ids) == 0 {
		return catalog.CopyJob{}, false, catalog.ErrInvalidf("brand %q has no templates to copy", r.SourceBrand)
	}
	job := catalog.CopyJob{
		ID:          a.newID(),
		RequestID:   r.RequestID,
		TargetBrand: r.TargetBrand,
		OnDuplicate: onDup,
		Total:       len(ids),
		CreatedAt:   time.Now().UTC(),
	}
	size := a.cfg.ChunkSize
	if onDup == catalog.FailOnDuplicate {
		// All or nothing is one transaction over the whole batch, hence one
		// message; its size is bounded so that transaction stays short.
		if len(ids) > a.cfg.MaxAllOrNothing {
			return catalog.CopyJob{}, false, catalog.ErrInvalidf("an all-or-nothing batch copies at most %d products, this one has %d: split it or use on_duplicate=skip", a.cfg.MaxAllOrNothing, len(ids))
		}
		size = len(ids)
	}
	chunks := catalog.SplitChunks(job, ids, size)
	job.Chunks = len(chunks)
	job, existed, err = a.store.CreateCopyJob(ctx, job, chunks)
	if err != nil {
		return catalog.CopyJob{}, false, err
	}
	if !existed && a.waker != nil {
		a.waker.Wake()
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
