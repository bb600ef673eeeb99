package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/services/order/internal/catalog"
)

// ProductConfig configures a ProductStore.
type ProductConfig struct {
	// Mode is how products are created (see catalog.Mode).
	Mode catalog.Mode
	// CopySubject is the subject batch-copy chunk messages are queued under,
	// events.ProductBatchCopy in production.
	CopySubject string
}

// Validate checks the configuration.
func (c ProductConfig) Validate() error {
	if _, err := catalog.ParseMode(string(c.Mode)); err != nil {
		return err
	}
	if c.CopySubject == "" {
		return errors.New("product store: CopySubject is required")
	}
	return nil
}

// ProductStore is the gorm implementation of catalog.Store and, bound to a
// message's transaction with WithTx, of catalog.ChunkStore.
type ProductStore struct {
	db  *gorm.DB
	cfg ProductConfig
	now func() time.Time
}

var (
	_ catalog.Store      = (*ProductStore)(nil)
	_ catalog.ChunkStore = (*ProductStore)(nil)
)

// NewProductStore returns a store over db.
func NewProductStore(db *gorm.DB, cfg ProductConfig) (*ProductStore, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &ProductStore{db: db, cfg: cfg, now: func() time.Time { return time.Now().UTC() }}, nil
}

// WithTx returns the store working inside tx, the transaction of the message
// being handled.
func (s *ProductStore) WithTx(tx *gorm.DB) *ProductStore {
	c := *s
	c.db = tx
	return &c
}

// createAttempts bounds the retries of a create or delete that was chosen as
// a deadlock victim, or lost a race to a product deleted again before its
// key could be read back.
const createAttempts = 5

// pause waits a little longer after each failed attempt, with jitter, so
// the transactions that collided do not collide again in step.
func pause(attempt int) {
	time.Sleep(time.Duration(attempt+1) * time.Duration(1+rand.IntN(5)) * time.Millisecond)
}

// CreateProduct creates p the way the configured mode does.
func (s *ProductStore) CreateProduct(ctx context.Context, p catalog.Product) (catalog.Product, error) {
	if s.cfg.Mode != catalog.ModeFixed {
		return s.createCheckThenInsert(ctx, p)
	}
	for attempt := range createAttempts {
		row := toDBProduct(p, s.now())
		err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			if err := tx.Create(&row).Error; err != nil {
				return err
			}
			return quiet(tx).Create(&productDedupRow{ProductID: row.ID, Name: row.Name, Model: row.Model, CreatedAt: row.CreatedAt}).Error
		})
		if err == nil {
			return toCatalogProduct(row), nil
		}
		if database.IsDeadlock(err) {
			// Concurrent inserts of one key whose dedup row was just deleted
			// can deadlock on it; InnoDB rolled this one back, so run it
			// again: the next round finds the winner's key.
			pause(attempt)
			continue
		}
		if !database.IsDuplicateKey(err) {
			return catalog.Product{}, fmt.Errorf("create product %s: %w", p.Key(), err)
		}
		// The key is taken by a committed live product: name it. If it was
		// deleted in the meantime the key is free again, so try once more.
		existing, err := s.dedupOwners(ctx, s.db, []catalog.Key{p.Key()}, false)
		if err != nil {
			return catalog.Product{}, fmt.Errorf("read product key %s: %w", p.Key(), err)
		}
		if id, ok := existing[p.Key()]; ok {
			return catalog.Product{}, &catalog.DuplicateError{Key: p.Key(), ExistingID: id}
		}
	}
	return catalog.Product{}, fmt.Errorf("create product %s: key kept changing hands", p.Key())
}

// createCheckThenInsert is the broken and orderly way: look for a live
// product, insert when there is none. Nothing stops a concurrent request from
// inserting between the check and the insert, so two callers can both create
// the product (incident 3).
func (s *ProductStore) createCheckThenInsert(ctx context.Context, p catalog.Product) (catalog.Product, error) {
	existing, err := s.liveOwners(ctx, s.db, []catalog.Key{p.Key()})
	if err != nil {
		return catalog.Product{}, fmt.Errorf("check product %s: %w", p.Key(), err)
	}
	if id, ok := existing[p.Key()]; ok {
		return catalog.Product{}, &catalog.DuplicateError{Key: p.Key(), ExistingID: id}
	}
	row := toDBProduct(p, s.now())
	if err := s.db.WithContext(ctx).Create(&row).Error; err != nil {
		return catalog.Product{}, fmt.Errorf("create product %s: %w", p.Key(), err)
	}
	return toCatalogProduct(row), nil
}

// Product returns a live product.
func (s *ProductStore) Product(ctx context.Context, id uint64) (catalog.Product, error) {
	var row productRow
	err := s.db.WithContext(ctx).Where("id = ? AND deleted = 0", id).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return catalog.Product{}, fmt.Errorf("product %d: %w", id, catalog.ErrNotFound)
	}
	if err != nil {
		return catalog.Product{}, fmt.Errorf("read product %d: %w", id, err)
	}
	return toCatalogProduct(row), nil
}

// ProductsByBrand lists live products of a brand.
func (s *ProductStore) ProductsByBrand(ctx context.Context, brand string, afterID uint64, limit int) ([]catalog.Product, error) {
	var rows []productRow
	err := s.db.WithContext(ctx).
		Where("brand = ? AND deleted = 0 AND id > ?", brand, afterID).
		Order("id").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("list products of brand %q: %w", brand, err)
	}
	out := make([]catalog.Product, len(rows))
	for i, r := range rows {
		out[i] = toCatalogProduct(r)
	}
	return out, nil
}

// DeleteProduct marks the product deleted and physically deletes its dedup
// row in the same transaction, so its key is free for a new product the
// moment the deletion commits, and never before.
func (s *ProductStore) DeleteProduct(ctx context.Context, id uint64) error {
	var err error
	for attempt := range createAttempts {
		if err = s.deleteProduct(ctx, id); !database.IsDeadlock(err) {
			return err
		}
		pause(attempt)
	}
	return err
}

func (s *ProductStore) deleteProduct(ctx context.Context, id uint64) error {
	now := s.now()
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Model(&productRow{}).Where("id = ? AND deleted = 0", id).
			Updates(map[string]any{"deleted": true, "deleted_at": now, "updated_at": now})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return catalog.ErrNotFound
		}
		// The broken and orderly modes write no dedup row; deleting none is
		// fine, so rows affected is not checked here.
		return tx.Where("product_id = ?", id).Delete(&productDedupRow{}).Error
	})
	if err != nil {
		return fmt.Errorf("delete product %d: %w", id, err)
	}
	return nil
}

// CreateTemplates stores templates.
func (s *ProductStore) CreateTemplates(ctx context.Context, ts []catalog.Template) ([]catalog.Template, error) {
	if len(ts) == 0 {
		return nil, nil
	}
	now := s.now()
	rows := make([]productTemplateRow, len(ts))
	for i, t := range ts {
		rows[i] = productTemplateRow{Brand: t.Brand, Name: t.Name, Model: t.Model, Price: t.Price, CreatedAt: now}
	}
	if err := s.db.WithContext(ctx).CreateInBatches(&rows, 1000).Error; err != nil {
		return nil, fmt.Errorf("create %d templates: %w", len(ts), err)
	}
	out := make([]catalog.Template, len(rows))
	for i, r := range rows {
		out[i] = toCatalogTemplate(r)
	}
	return out, nil
}

// TemplateIDs resolves a copy request's selection.
func (s *ProductStore) TemplateIDs(ctx context.Context, r catalog.CopyRequest) (ids, missing []uint64, err error) {
	db := s.db.WithContext(ctx).Model(&productTemplateRow{})
	if r.SourceBrand != "" {
		if err := db.Where("brand = ?", r.SourceBrand).Order("id").Pluck("id", &ids).Error; err != nil {
			return nil, nil, fmt.Errorf("templates of brand %q: %w", r.SourceBrand, err)
		}
		return ids, nil, nil
	}
	want := uniqueIDs(r.TemplateIDs)
	found := make(map[uint64]bool, len(want))
	for start := 0; start < len(want); start += 1000 {
		var part []uint64
		if err := s.db.WithContext(ctx).Model(&productTemplateRow{}).Where("id IN ?", want[start:min(start+1000, len(want))]).Pluck("id", &part).Error; err != nil {
			return nil, nil, fmt.Errorf("look up templates: %w", err)
		}
		for _, id := range part {
			found[id] = true
		}
	}
	for _, id := range want {
		if found[id] {
			ids = append(ids, id)
		} else {
			missing = append(missing, id)
		}
	}
	return ids, missing, nil
}

func uniqueIDs(ids []uint64) []uint64 {
	seen := make(map[uint64]bool, len(ids))
	out := make([]uint64, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// CreateCopyJob stores a job, its chunks and one outbox message per chunk in
// one transaction: the job exists if and only if its work is queued.
func (s *ProductStore) CreateCopyJob(ctx context.Context, job catalog.CopyJob, chunks []catalog.CopyChunk) (catalog.CopyJob, bool, error) {
	now := s.now()
	chunkRows := make([]productCopyChunkRow, len(chunks))
	msgs := make([]outbox.Message, len(chunks))
	for i, c := range chunks {
		chunkRows[i] = productCopyChunkRow{JobID: job.ID, Seq: c.Seq, Size: len(c.TemplateIDs), Status: chunkPending, UpdatedAt: now}
		body, err := json.Marshal(c)
		if err != nil {
			return catalog.CopyJob{}, false, fmt.Errorf("encode chunk %d: %w", c.Seq, err)
		}
		msgs[i] = outbox.Message{ID: c.MessageID(), Subject: s.cfg.CopySubject, Body: body}
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		row := toDBCopyJob(job)
		if err := quiet(tx).Create(&row).Error; err != nil {
			return err
		}
		if err := tx.CreateInBatches(&chunkRows, 500).Error; err != nil {
			return err
		}
		return outbox.Add(tx, msgs...)
	})
	if err == nil {
		return job, false, nil
	}
	if !database.IsDuplicateKey(err) {
		return catalog.CopyJob{}, false, fmt.Errorf("create copy job for request %q: %w", job.RequestID, err)
	}
	// The caller resubmitted a request id: answer with the job it created.
	var row productCopyJobRow
	if err := s.db.WithContext(ctx).Where("request_id = ?", job.RequestID).Take(&row).Error; err != nil {
		return catalog.CopyJob{}, false, fmt.Errorf("read copy job for request %q: %w", job.RequestID, err)
	}
	return toCatalogCopyJob(row), true, nil
}

// maxReportedDuplicates bounds the duplicates a progress report lists.
const maxReportedDuplicates = 100

// CopyProgress sums a job's chunks.
func (s *ProductStore) CopyProgress(ctx context.Context, jobID string) (catalog.CopyProgress, error) {
	var job productCopyJobRow
	err := s.db.WithContext(ctx).Where("id = ?", jobID).Take(&job).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return catalog.CopyProgress{}, fmt.Errorf("copy job %s: %w", jobID, catalog.ErrNotFound)
	}
	if err != nil {
		return catalog.CopyProgress{}, fmt.Errorf("read copy job %s: %w", jobID, err)
	}
	p := catalog.CopyProgress{Job: toCatalogCopyJob(job)}
	var sums struct {
		Done, Created, Skipped, Failed, FailedChunks int
	}
	err = s.db.WithContext(ctx).Model(&productCopyChunkRow{}).Where("job_id = ?", jobID).
		Select("COALESCE(SUM(status <> ?),0) AS done, COALESCE(SUM(created),0) AS created, COALESCE(SUM(skipped),0) AS skipped, COALESCE(SUM(failed),0) AS failed, COALESCE(SUM(status = ?),0) AS failed_chunks", chunkPending, chunkFailed).
		Scan(&sums).Error
	if err != nil {
		return catalog.CopyProgress{}, fmt.Errorf("sum copy job %s: %w", jobID, err)
	}
	p.ChunksDone, p.Created, p.Skipped, p.Failed, p.FailedChunk = sums.Done, sums.Created, sums.Skipped, sums.Failed, sums.FailedChunks > 0
	var noted []productCopyChunkRow
	err = s.db.WithContext(ctx).Where("job_id = ? AND (error <> '' OR duplicates IS NOT NULL)", jobID).
		Order("seq").Limit(maxReportedDuplicates).Find(&noted).Error
	if err != nil {
		return catalog.CopyProgress{}, fmt.Errorf("read copy job %s notes: %w", jobID, err)
	}
	for _, c := range noted {
		if c.Error != "" {
			p.Errors = append(p.Errors, fmt.Sprintf("chunk %d: %s", c.Seq, c.Error))
		}
		if c.Duplicates != nil && len(p.Duplicates) < maxReportedDuplicates {
			var dups []catalog.Duplicate
			if err := json.Unmarshal([]byte(*c.Duplicates), &dups); err != nil {
				return catalog.CopyProgress{}, fmt.Errorf("decode chunk %d duplicates: %w", c.Seq, err)
			}
			p.Duplicates = append(p.Duplicates, dups[:min(len(dups), maxReportedDuplicates-len(p.Duplicates))]...)
		}
	}
	return p, nil
}
