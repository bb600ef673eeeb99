package idempotency

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncemall/oncemall/pkg/metrics"
)

// Archiver deletes records past their expire_time, in bounded batches. The
// platform runs it as a job on ArchiveSchedule, on one replica at a time
// (platform.Wiring.Idempotency).
type Archiver struct {
	store   *Store
	cfg     Config
	log     *slog.Logger
	deleted prometheus.Counter
}

// NewArchiver returns an archiver over store.
func NewArchiver(store *Store, cfg Config, log *slog.Logger, reg prometheus.Registerer) (*Archiver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	deleted, err := metrics.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "idempotency_records_archived_total",
		Help: "Idempotency records deleted after their expire_time.",
	}))
	if err != nil {
		return nil, err
	}
	return &Archiver{store: store, cfg: cfg, log: log, deleted: deleted}, nil
}

// RunOnce deletes expired records, ArchiveBatch at a time, until none is left
// or ArchiveMaxBatches statements ran, and returns how many it deleted.
func (a *Archiver) RunOnce(ctx context.Context) (int64, error) {
	var total int64
	for range a.cfg.ArchiveMaxBatches {
		n, err := a.store.DeleteExpired(ctx, a.store.now(), a.cfg.ArchiveBatch)
		total += n
		a.deleted.Add(float64(n))
		if err != nil {
			return total, err
		}
		if n < int64(a.cfg.ArchiveBatch) {
			break
		}
	}
	return total, nil
}
