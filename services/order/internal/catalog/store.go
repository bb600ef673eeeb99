package catalog

import "context"

// Store is the persistence the catalog's use cases need. Implementations
// enforce the configured Mode when they create products.
type Store interface {
	// CreateProduct creates p. A live product with the same key makes it
	// return a *DuplicateError naming the existing product.
	CreateProduct(ctx context.Context, p Product) (Product, error)
	// Product returns a live product, or ErrNotFound.
	Product(ctx context.Context, id uint64) (Product, error)
	// ProductsByBrand lists live products of brand with id > afterID, by id.
	ProductsByBrand(ctx context.Context, brand string, afterID uint64, limit int) ([]Product, error)
	// DeleteProduct deletes a live product logically and releases its key in
	// the same transaction; ErrNotFound when there is no such live product.
	DeleteProduct(ctx context.Context, id uint64) error

	// CreateTemplates stores templates and returns them with their ids.
	CreateTemplates(ctx context.Context, ts []Template) ([]Template, error)
	// TemplateIDs resolves a copy request's selection to template ids. Ids
	// that do not exist are returned in missing.
	TemplateIDs(ctx context.Context, r CopyRequest) (ids, missing []uint64, err error)

	// CreateCopyJob stores job and its chunks, and queues one message per
	// chunk in the same transaction. When a job with the same request id
	// exists, it returns that job and existed = true, writing nothing.
	CreateCopyJob(ctx context.Context, job CopyJob, chunks []CopyChunk) (_ CopyJob, existed bool, err error)
	// CopyProgress returns a job's progress, or ErrNotFound.
	CopyProgress(ctx context.Context, jobID string) (CopyProgress, error)
}

// ChunkStore processes one chunk inside the transaction of the message that
// carries it, so the products it creates, the chunk's counters and the
// processed-message record commit together.
type ChunkStore interface {
	// CopyChunk creates the chunk's products and records its result. A chunk
	// already processed is left alone and reports done = false.
	CopyChunk(ctx context.Context, c CopyChunk) (r ChunkResult, done bool, err error)
}
