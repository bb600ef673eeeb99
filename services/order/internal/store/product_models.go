package store

import (
	"time"

	"github.com/oncemall/oncemall/services/order/internal/product"
)

// productRow is a row of products.
type productRow struct {
	ID        uint64 `gorm:"primaryKey"`
	Brand     string
	Name      string
	Model     string
	Price     int64
	Deleted   bool
	DeletedAt *time.Time
	CreatedAt time.Time
	UpdatedAt time.Time
}

func (productRow) TableName() string { return "products" }

func toProductRow(p product.Product, now time.Time) productRow {
	return productRow{Brand: p.Brand, Name: p.Name, Model: p.Model, Price: p.Price, CreatedAt: now, UpdatedAt: now}
}

// productDedupRow is a row of product_dedup: one per live product.
type productDedupRow struct {
	ProductID uint64 `gorm:"primaryKey;autoIncrement:false"`
	Name      string
	Model     string
	CreatedAt time.Time
}

func (productDedupRow) TableName() string { return "product_dedup" }

// productTemplateRow is a row of product_templates.
type productTemplateRow struct {
	ID        uint64 `gorm:"primaryKey"`
	Brand     string
	Name      string
	Model     string
	Price     int64
	CreatedAt time.Time
}

func (productTemplateRow) TableName() string { return "product_templates" }

func toTemplate(r productTemplateRow) product.Template {
	return product.Template{ID: r.ID, Brand: r.Brand, Name: r.Name, Model: r.Model, Price: r.Price}
}

// productCopyJobRow is a row of product_copy_jobs.
type productCopyJobRow struct {
	ID          string `gorm:"primaryKey"`
	RequestID   string
	TargetBrand string
	OnDuplicate string
	Total       int
	Chunks      int
	CreatedAt   time.Time
}

func (productCopyJobRow) TableName() string { return "product_copy_jobs" }

func toCopyJobRow(j product.CopyJob) productCopyJobRow {
	return productCopyJobRow{ID: j.ID, RequestID: j.RequestID, TargetBrand: j.TargetBrand, OnDuplicate: string(j.OnDuplicate), Total: j.Total, Chunks: j.Chunks, CreatedAt: j.CreatedAt}
}

func toCopyJob(r productCopyJobRow) product.CopyJob {
	return product.CopyJob{ID: r.ID, RequestID: r.RequestID, TargetBrand: r.TargetBrand, OnDuplicate: product.OnDuplicate(r.OnDuplicate), Total: r.Total, Chunks: r.Chunks, CreatedAt: r.CreatedAt}
}

// productCopyChunkRow is a row of product_copy_chunks.
type productCopyChunkRow struct {
	JobID      string `gorm:"primaryKey"`
	Seq        int    `gorm:"primaryKey;autoIncrement:false"`
	Size       int
	Status     string
	Created    int
	Skipped    int
	Failed     int
	Error      string
	Duplicates *string
	UpdatedAt  time.Time
}

func (productCopyChunkRow) TableName() string { return "product_copy_chunks" }

// Chunk statuses.
const (
	chunkPending = "pending"
	chunkDone    = "done"
	chunkFailed  = "failed"
)
