package product

import (
	"context"

	"github.com/oncemall/oncemall/pkg/events"
)

// Store is the catalog's persistence: the reads the use cases make outside a
// transaction, and InTx for everything that writes.
type Store interface {
	// InTx runs fn in one transaction and commits it when fn returns nil;
	// an error from fn rolls everything back and is returned as is, and so
	// is a failed commit. After a commit that added events it wakes the
	// outbox relay.
	InTx(ctx context.Context, fn func(Tx) error) error

	// Product returns a live product with its available stock, or
	// ErrNotFound.
	Product(ctx context.Context, id uint64) (Product, error)
	// ProductsByBrand lists live products of brand with id > afterID, by
	// id, with their available stock.
	ProductsByBrand(ctx context.Context, brand string, afterID uint64, limit int) ([]Product, error)
	// SetStock sets the units of a live product available to order,
	// whatever they were, and returns them; ErrNotFound when there is no
	// such live product.
	SetStock(ctx context.Context, s Stock) (Stock, error)
	// CreateTemplates stores templates and returns them with their ids.
	CreateTemplates(ctx context.Context, ts []Template) ([]Template, error)
	// TemplateIDs resolves a copy request's selection to template ids. Ids
	// that do not exist are returned in missing.
	TemplateIDs(ctx context.Context, r CopyRequest) (ids, missing []uint64, err error)
	// CopyJobByRequest returns the job accepted for a request id, or
	// ErrNotFound.
	CopyJobByRequest(ctx context.Context, requestID string) (CopyJob, error)
	// CopyProgress returns a job with its chunks' counters summed, or
	// ErrNotFound.
	CopyProgress(ctx context.Context, jobID string) (CopyProgress, error)
}

// Tx is what a transaction of the catalog does. Incident 3's fix inserts
// with keys (KeyOwners, InsertKeyed); the lab's check-then-insert uses
// methods of the store's transaction this interface does not carry. Any
// method that reads or writes products or keys
// returns an error wrapping ErrDeadlock when the database rolled the
// transaction back as a deadlock victim.
type Tx interface {
	// KeyOwners returns the product holding each key in the dedup table,
	// where every live product of the fixed mode has its key. With latest it
	// is a locking read, which sees the latest committed keys rather than
	// the transaction's snapshot: what a transaction that lost a key to
	// another must read to name the winner.
	KeyOwners(ctx context.Context, keys []Key, latest bool) (map[Key]uint64, error)
	// InsertKeyed inserts ps and their keys, all or none, and returns them
	// with their ids. The keys are unique among live products: when one is
	// taken it returns ErrKeyTaken with nothing of ps written and the
	// transaction still usable.
	InsertKeyed(ctx context.Context, ps []Product) ([]Product, error)
	// DeleteProduct marks a live product deleted and releases its key, so
	// a new product may take it once the transaction commits; ErrNotFound
	// when there is no such live product.
	DeleteProduct(ctx context.Context, id uint64) error

	// InsertCopyJob stores job and its chunks, pending; ErrJobExists when
	// a job with the same request id was stored before.
	InsertCopyJob(ctx context.Context, job CopyJob, chunks []CopyChunk) error
	// LockChunk locks a chunk until the transaction ends, so that two
	// deliveries of it run one after the other, and reports whether it is
	// still pending; ErrNotFound when the job has no such chunk.
	LockChunk(ctx context.Context, jobID string, seq int) (pending bool, err error)
	// Templates returns those of the templates ids that exist, by id.
	Templates(ctx context.Context, ids []uint64) (map[uint64]Template, error)
	// FinishChunk records a pending chunk's result; recording it twice is
	// an error.
	FinishChunk(ctx context.Context, c CopyChunk, r ChunkResult) error

	// AddEvent writes e to the outbox in this transaction; the relay
	// publishes it after the commit.
	AddEvent(ctx context.Context, e events.Event) error
}
