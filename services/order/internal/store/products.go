package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/services/order/internal/product"
)

// Products is the gorm implementation of product.Store.
type Products struct {
	db   *gorm.DB
	send Send
	now  func() time.Time
}

var (
	_ product.Store = (*Products)(nil)
	_ product.Tx    = (*productTx)(nil)
)

// NewProducts returns the catalog's store over db; send (the outbox relay's
// Send) gets the events of every transaction that added some, once it
// committed.
func NewProducts(db *gorm.DB, send Send) *Products {
	return &Products{db: db, send: send, now: func() time.Time { return time.Now().UTC() }}
}

// InTx runs fn in one transaction (see product.Store).
func (s *Products) InTx(ctx context.Context, fn func(product.Tx) error) error {
	return inTx(ctx, s.db, s.send, func(t *txBase) error { return fn(&productTx{txBase: t, now: s.now}) })
}

// InboxTx returns the product.Tx of tx, the transaction an inbox handler
// runs in (inbox.Handler): the inbox commits it, and the relay is woken once
// it has, if it added events.
func (s *Products) InboxTx(ctx context.Context, tx *gorm.DB) product.Tx {
	return &productTx{txBase: inboxBase(ctx, tx, s.send), now: s.now}
}

// productColumns are the columns of a product read: the product and its
// available stock (zero without a stock row).
const productColumns = "p.id, p.brand, p.name, p.model, p.price, p.created_at, COALESCE(s.available, 0) AS available"

// productWithStock is a product read with its stock.
type productWithStock struct {
	ID        uint64
	Brand     string
	Name      string
	Model     string
	Price     int64
	CreatedAt time.Time
	Available int
}

// Product returns a live product with its stock.
func (s *Products) Product(ctx context.Context, id uint64) (product.Product, error) {
	var rows []productWithStock
	err := s.db.WithContext(ctx).Raw("SELECT "+productColumns+` FROM products p
		LEFT JOIN product_stock s ON s.product_id = p.id WHERE p.id = ? AND p.deleted = 0`, id).Scan(&rows).Error
	if err != nil {
		return product.Product{}, fmt.Errorf("read product %d: %w", id, err)
	}
	if len(rows) == 0 {
		return product.Product{}, fmt.Errorf("product %d: %w", id, product.ErrNotFound)
	}
	return rows[0].toProduct(), nil
}

func (r productWithStock) toProduct() product.Product {
	return product.Product{ID: r.ID, Brand: r.Brand, Name: r.Name, Model: r.Model, Price: r.Price, CreatedAt: r.CreatedAt, Available: r.Available}
}

// ProductsByBrand lists live products of a brand with their stock.
func (s *Products) ProductsByBrand(ctx context.Context, brand string, afterID uint64, limit int) ([]product.Product, error) {
	var rows []productWithStock
	err := s.db.WithContext(ctx).Raw("SELECT "+productColumns+` FROM products p
		LEFT JOIN product_stock s ON s.product_id = p.id
		WHERE p.brand = ? AND p.deleted = 0 AND p.id > ? ORDER BY p.id LIMIT ?`, brand, afterID, limit).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("list products of brand %q: %w", brand, err)
	}
	out := make([]product.Product, len(rows))
	for i, r := range rows {
		out[i] = r.toProduct()
	}
	return out, nil
}

// SetStock upserts the product's stock row in a transaction that first
// takes a shared lock on the live product, so that a deletion racing it
// either commits first (and this answers ErrNotFound) or waits.
func (s *Products) SetStock(ctx context.Context, st product.Stock) (product.Stock, error) {
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var ids []uint64
		if err := tx.Raw("SELECT id FROM products WHERE id = ? AND deleted = 0 LOCK IN SHARE MODE", st.ProductID).Scan(&ids).Error; err != nil {
			return fmt.Errorf("read product %d: %w", st.ProductID, err)
		}
		if len(ids) == 0 {
			return fmt.Errorf("product %d: %w", st.ProductID, product.ErrNotFound)
		}
		// The version grows on every write, as on every other stock write,
		// so an optimistic writer that read the old value fails its swap.
		err := tx.Exec(`INSERT INTO product_stock (product_id, available, version, updated_at) VALUES (?, ?, 0, ?)
			ON DUPLICATE KEY UPDATE available = VALUES(available), version = version + 1, updated_at = VALUES(updated_at)`,
			st.ProductID, st.Available, s.now()).Error
		if err != nil {
			return fmt.Errorf("set stock of product %d: %w", st.ProductID, err)
		}
		return nil
	})
	if err != nil {
		return product.Stock{}, err
	}
	return st, nil
}

// CreateTemplates stores templates.
func (s *Products) CreateTemplates(ctx context.Context, ts []product.Template) ([]product.Template, error) {
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
	out := make([]product.Template, len(rows))
	for i, r := range rows {
		out[i] = toTemplate(r)
	}
	return out, nil
}

// TemplateIDs resolves a copy request's selection.
func (s *Products) TemplateIDs(ctx context.Context, r product.CopyRequest) (ids, missing []uint64, err error) {
	if r.SourceBrand != "" {
		if err := s.db.WithContext(ctx).Model(&productTemplateRow{}).Where("brand = ?", r.SourceBrand).Order("id").Pluck("id", &ids).Error; err != nil {
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

// CopyJobByRequest returns the job accepted for requestID.
func (s *Products) CopyJobByRequest(ctx context.Context, requestID string) (product.CopyJob, error) {
	var row productCopyJobRow
	err := s.db.WithContext(ctx).Where("request_id = ?", requestID).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return product.CopyJob{}, fmt.Errorf("copy job for request %q: %w", requestID, product.ErrNotFound)
	}
	if err != nil {
		return product.CopyJob{}, fmt.Errorf("read copy job for request %q: %w", requestID, err)
	}
	return toCopyJob(row), nil
}

// maxReportedDuplicates bounds the duplicates a progress report lists.
const maxReportedDuplicates = 100

// CopyProgress sums a job's chunks.
func (s *Products) CopyProgress(ctx context.Context, jobID string) (product.CopyProgress, error) {
	var job productCopyJobRow
	err := s.db.WithContext(ctx).Where("id = ?", jobID).Take(&job).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return product.CopyProgress{}, fmt.Errorf("copy job %s: %w", jobID, product.ErrNotFound)
	}
	if err != nil {
		return product.CopyProgress{}, fmt.Errorf("read copy job %s: %w", jobID, err)
	}
	p := product.CopyProgress{Job: toCopyJob(job)}
	var sums struct {
		Done, Created, Skipped, Failed, FailedChunks int
	}
	err = s.db.WithContext(ctx).Model(&productCopyChunkRow{}).Where("job_id = ?", jobID).
		Select("COALESCE(SUM(status <> ?),0) AS done, COALESCE(SUM(created),0) AS created, COALESCE(SUM(skipped),0) AS skipped, COALESCE(SUM(failed),0) AS failed, COALESCE(SUM(status = ?),0) AS failed_chunks", chunkPending, chunkFailed).
		Scan(&sums).Error
	if err != nil {
		return product.CopyProgress{}, fmt.Errorf("sum copy job %s: %w", jobID, err)
	}
	p.ChunksDone, p.Created, p.Skipped, p.Failed, p.FailedChunk = sums.Done, sums.Created, sums.Skipped, sums.Failed, sums.FailedChunks > 0
	var noted []productCopyChunkRow
	err = s.db.WithContext(ctx).Where("job_id = ? AND (error <> '' OR duplicates IS NOT NULL)", jobID).
		Order("seq").Limit(maxReportedDuplicates).Find(&noted).Error
	if err != nil {
		return product.CopyProgress{}, fmt.Errorf("read copy job %s notes: %w", jobID, err)
	}
	for _, c := range noted {
		if c.Error != "" {
			p.Errors = append(p.Errors, fmt.Sprintf("chunk %d: %s", c.Seq, c.Error))
		}
		if c.Duplicates != nil && len(p.Duplicates) < maxReportedDuplicates {
			var dups []product.Duplicate
			if err := json.Unmarshal([]byte(*c.Duplicates), &dups); err != nil {
				return product.CopyProgress{}, fmt.Errorf("decode chunk %d duplicates: %w", c.Seq, err)
			}
			p.Duplicates = append(p.Duplicates, dups[:min(len(dups), maxReportedDuplicates-len(p.Duplicates))]...)
		}
	}
	return p, nil
}
