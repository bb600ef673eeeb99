package outbox

import (
	"context"
	"fmt"
	"time"
)

// Poll is the safety-net poll: it makes the claim path publish the rows
// that are due (their hand-off, backoff or lease has passed: a commit whose
// Send was skipped, failed or never came, a retry, a crashed relay's batch),
// and samples the backlog gauges and the count of failed rows. A failed
// sample is logged and returned.
func (r *Relay) Poll(ctx context.Context) error {
	r.pollNow()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := Stats(ctx, r.db)
	if err != nil {
		r.log.Warn("outbox backlog sample failed", "err", err)
		return err
	}
	r.m.pending.Set(float64(st.Pending))
	r.m.failedRows.Set(float64(st.Failed))
	r.m.oldestAge.Set(st.OldestPendingAge.Seconds())
	return nil
}

// Cleanup deletes sent rows created more than Retention ago, CleanupBatch
// rows per statement so no statement holds locks for long, and returns how
// many it deleted. Pending and failed rows are never deleted: they wait for
// the relay or a redrive. (Selecting by created_at rather than sent_at keeps
// the mark-sent UPDATE off one more index; a row redriven long after its
// creation is deleted at the first cleanup after it is sent.)
func (r *Relay) Cleanup(ctx context.Context) (int64, error) {
	cutoff := time.Now().UTC().Add(-r.cfg.Retention)
	var total int64
	for {
		res := r.db.WithContext(ctx).Exec("DELETE FROM local_message WHERE created_at < ? AND status = 'sent' ORDER BY created_at LIMIT ?", cutoff, r.cfg.CleanupBatch)
		if res.Error != nil {
			return total, fmt.Errorf("outbox cleanup: %w", res.Error)
		}
		total += res.RowsAffected
		r.m.cleaned.Add(float64(res.RowsAffected))
		if res.RowsAffected < int64(r.cfg.CleanupBatch) {
			break
		}
	}
	if total > 0 {
		r.log.Info("outbox cleanup", "deleted", total, "older_than", cutoff)
	}
	return total, nil
}
