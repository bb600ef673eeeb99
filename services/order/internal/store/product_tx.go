package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/logger"

	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/services/order/internal/product"
)

// productTx is the gorm implementation of product.Tx.
type productTx struct {
	*txBase
	now func() time.Time
}

// LiveOwners returns a live product for each key that has one (the oldest,
// when the broken mode has let several in), with a plain read: the check
// of the lab's check-then-insert (services/order/lab).
func (t *productTx) LiveOwners(ctx context.Context, keys []product.Key) (map[product.Key]uint64, error) {
	owners := make(map[product.Key]uint64, len(keys))
	if len(keys) == 0 {
		return owners, nil
	}
	cond, args := keyTuples(keys)
	err := queryRows(ctx, t.db, "SELECT id, name, model FROM products WHERE deleted = 0 AND "+cond+" ORDER BY id", args, func(rows *sql.Rows) error {
		var id uint64
		var k product.Key
		if err := rows.Scan(&id, &k.Name, &k.Model); err != nil {
			return err
		}
		if _, ok := owners[k]; !ok {
			owners[k] = id
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read live products of %d keys: %w", len(keys), deadlock(err))
	}
	return owners, nil
}

// KeyOwners returns the product holding each key in product_dedup. With
// latest it is a locking read (LOCK IN SHARE MODE), which sees the latest
// committed rows rather than the transaction's snapshot.
func (t *productTx) KeyOwners(ctx context.Context, keys []product.Key, latest bool) (map[product.Key]uint64, error) {
	owners := make(map[product.Key]uint64, len(keys))
	if len(keys) == 0 {
		return owners, nil
	}
	cond, args := keyTuples(keys)
	q := "SELECT product_id, name, model FROM product_dedup WHERE " + cond
	if latest {
		q += " LOCK IN SHARE MODE"
	}
	err := queryRows(ctx, t.db, q, args, func(rows *sql.Rows) error {
		var id uint64
		var k product.Key
		if err := rows.Scan(&id, &k.Name, &k.Model); err != nil {
			return err
		}
		owners[k] = id
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %d product keys: %w", len(keys), deadlock(err))
	}
	return owners, nil
}

// InsertProducts inserts ps without their keys: the insert of the lab's
// check-then-insert.
func (t *productTx) InsertProducts(ctx context.Context, ps []product.Product) ([]product.Product, error) {
	created, err := t.insertProducts(ctx, ps)
	return created, deadlock(err)
}

// InsertKeyed inserts ps and their product_dedup rows under a savepoint:
// when a key is taken, the duplicate key error rolls back to the savepoint,
// which removes the products inserted with it, and ErrKeyTaken is returned.
func (t *productTx) InsertKeyed(ctx context.Context, ps []product.Product) ([]product.Product, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	db := t.db.WithContext(ctx)
	if err := db.SavePoint("product_keyed").Error; err != nil {
		return nil, fmt.Errorf("savepoint: %w", err)
	}
	created, err := t.insertProducts(ctx, ps)
	if err == nil {
		err = t.insertKeys(ctx, created)
	}
	switch {
	case err == nil:
		return created, nil
	case database.IsDeadlock(err):
		// InnoDB rolled the whole transaction back, savepoint included.
		return nil, deadlock(err)
	case database.IsDuplicateKey(err):
		if err := db.RollbackTo("product_keyed").Error; err != nil {
			return nil, fmt.Errorf("rollback to savepoint: %w", err)
		}
		return nil, fmt.Errorf("%w: %w", product.ErrKeyTaken, err)
	}
	return nil, err
}

// DeleteProduct marks the product deleted and physically deletes its dedup
// row in the same transaction, so its key is free for a new product the
// moment the deletion commits, and never before.
func (t *productTx) DeleteProduct(ctx context.Context, id uint64) error {
	now := t.now()
	db := t.db.WithContext(ctx)
	res := db.Model(&productRow{}).Where("id = ? AND deleted = 0", id).
		Updates(map[string]any{"deleted": true, "deleted_at": now, "updated_at": now})
	if res.Error == nil && res.RowsAffected == 0 {
		return fmt.Errorf("delete product %d: %w", id, product.ErrNotFound)
	}
	err := res.Error
	if err == nil {
		// The broken and orderly modes write no dedup row; deleting none is
		// fine, so rows affected is not checked here.
		err = db.Where("product_id = ?", id).Delete(&productDedupRow{}).Error
	}
	if err != nil {
		return fmt.Errorf("delete product %d: %w", id, deadlock(err))
	}
	return nil
}

// InsertCopyJob stores a job and its chunks, pending.
func (t *productTx) InsertCopyJob(ctx context.Context, job product.CopyJob, chunks []product.CopyChunk) error {
	now := t.now()
	db := t.db.WithContext(ctx)
	row := toCopyJobRow(job)
	if err := quiet(db).Create(&row).Error; err != nil {
		if database.IsDuplicateKey(err) {
			return fmt.Errorf("copy job for request %q: %w", job.RequestID, product.ErrJobExists)
		}
		return fmt.Errorf("create copy job for request %q: %w", job.RequestID, err)
	}
	chunkRows := make([]productCopyChunkRow, len(chunks))
	for i, c := range chunks {
		chunkRows[i] = productCopyChunkRow{JobID: job.ID, Seq: c.Seq, Size: len(c.TemplateIDs), Status: chunkPending, UpdatedAt: now}
	}
	if err := db.CreateInBatches(&chunkRows, 500).Error; err != nil {
		return fmt.Errorf("create %d chunks of copy job %s: %w", len(chunks), job.ID, err)
	}
	return nil
}

// LockChunk locks the chunk row until the transaction ends.
func (t *productTx) LockChunk(ctx context.Context, jobID string, seq int) (bool, error) {
	var chunk productCopyChunkRow
	err := t.db.WithContext(ctx).Clauses(clause.Locking{Strength: "UPDATE"}).Where("job_id = ? AND seq = ?", jobID, seq).Take(&chunk).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return false, fmt.Errorf("chunk %s/%d: %w", jobID, seq, product.ErrNotFound)
	}
	if err != nil {
		return false, fmt.Errorf("lock chunk %s/%d: %w", jobID, seq, err)
	}
	return chunk.Status == chunkPending, nil
}

// Templates loads the templates of ids that exist.
func (t *productTx) Templates(ctx context.Context, ids []uint64) (map[uint64]product.Template, error) {
	byID := make(map[uint64]product.Template, len(ids))
	if len(ids) == 0 {
		return byID, nil
	}
	var q strings.Builder
	q.WriteString("SELECT id, brand, name, model, price FROM product_templates WHERE id IN (")
	args := make([]any, len(ids))
	for i, id := range ids {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteByte('?')
		args[i] = id
	}
	q.WriteByte(')')
	err := queryRows(ctx, t.db, q.String(), args, func(rows *sql.Rows) error {
		var tm product.Template
		if err := rows.Scan(&tm.ID, &tm.Brand, &tm.Name, &tm.Model, &tm.Price); err != nil {
			return err
		}
		byID[tm.ID] = tm
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load %d templates: %w", len(ids), err)
	}
	return byID, nil
}

// FinishChunk records the chunk's result with a conditional update from
// pending; exactly one row must change, or the chunk was processed twice.
func (t *productTx) FinishChunk(ctx context.Context, c product.CopyChunk, r product.ChunkResult) error {
	status := chunkDone
	if r.Error != "" {
		status = chunkFailed
	}
	var dups *string
	if len(r.Duplicates) > 0 {
		b, err := json.Marshal(r.Duplicates)
		if err != nil {
			return fmt.Errorf("encode duplicates of chunk %s/%d: %w", c.JobID, c.Seq, err)
		}
		str := string(b)
		dups = &str
	}
	res := t.db.WithContext(ctx).Model(&productCopyChunkRow{}).
		Where("job_id = ? AND seq = ? AND status = ?", c.JobID, c.Seq, chunkPending).
		Updates(map[string]any{
			"status": status, "created": r.Created, "skipped": r.Skipped, "failed": r.Failed,
			"error": truncate(r.Error, 1024), "duplicates": dups, "updated_at": t.now(),
		})
	if res.Error != nil {
		return fmt.Errorf("record chunk %s/%d: %w", c.JobID, c.Seq, res.Error)
	}
	if res.RowsAffected != 1 {
		return fmt.Errorf("record chunk %s/%d: %d rows changed, want 1", c.JobID, c.Seq, res.RowsAffected)
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// queryRows runs q on db's connection (a transaction) and calls scan for
// every row. The copy workers' reads go straight to the driver: gorm's Find
// reflects over the destination for every row, which on this path cost more
// CPU than the query.
func queryRows(ctx context.Context, db *gorm.DB, q string, args []any, scan func(*sql.Rows) error) error {
	rows, err := db.Statement.ConnPool.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// insertProducts inserts ps in one multi-row statement and returns them with
// their ids. The statement is built here and sent straight to the
// transaction's connection: on a worker's hot path gorm's Create spent more
// CPU reflecting over a hundred structs than the driver spent sending them.
//
// The ids are the first inserted id plus the row's position, as gorm's own
// batch Create assumes: a multi-row INSERT … VALUES is a "simple insert",
// whose AUTO_INCREMENT values InnoDB reserves at once, so they are
// consecutive with auto_increment_increment 1 (gaps in interleaved lock
// mode 2, MySQL 8's default, come from bulk inserts such as INSERT …
// SELECT). The assumption is checked, not trusted: the last row is read back
// by its computed id, and a mismatch fails the transaction loudly instead of
// pointing dedup rows at the wrong products.
func (t *productTx) insertProducts(ctx context.Context, ps []product.Product) ([]product.Product, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	conn := t.db.Statement.ConnPool
	now := t.now()
	var q strings.Builder
	q.WriteString("INSERT INTO products (brand, name, model, price, deleted, created_at, updated_at) VALUES ")
	args := make([]any, 0, 6*len(ps))
	for i, p := range ps {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString("(?,?,?,?,0,?,?)")
		r := toProductRow(p, now)
		args = append(args, r.Brand, r.Name, r.Model, r.Price, r.CreatedAt, r.UpdatedAt)
	}
	res, err := conn.ExecContext(ctx, q.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("insert %d products: %w", len(ps), err)
	}
	first, err := res.LastInsertId()
	if err != nil {
		return nil, fmt.Errorf("insert %d products: id: %w", len(ps), err)
	}
	if n, err := res.RowsAffected(); err != nil || n != int64(len(ps)) {
		return nil, fmt.Errorf("insert %d products: %d rows inserted (%v)", len(ps), n, err)
	}
	created := make([]product.Product, len(ps))
	for i, p := range ps {
		p.ID, p.CreatedAt = uint64(first)+uint64(i), now
		created[i] = p
	}
	last := created[len(created)-1]
	var name, model string
	if err := conn.QueryRowContext(ctx, "SELECT name, model FROM products WHERE id = ?", last.ID).Scan(&name, &model); err != nil || name != last.Name || model != last.Model {
		return nil, fmt.Errorf("insert %d products: ids from %d are not consecutive (auto_increment_increment must be 1): last row reads (%q, %q), err %v", len(ps), first, name, model, err)
	}
	return created, nil
}

// insertKeys inserts the product_dedup rows of ps (with their ids) in one
// statement. A duplicate key here is the expected answer of a lost race;
// sent outside gorm, it is not logged as a statement error either.
func (t *productTx) insertKeys(ctx context.Context, ps []product.Product) error {
	now := t.now()
	var q strings.Builder
	q.WriteString("INSERT INTO product_dedup (product_id, name, model, created_at) VALUES ")
	args := make([]any, 0, 4*len(ps))
	for i, p := range ps {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString("(?,?,?,?)")
		args = append(args, p.ID, p.Name, p.Model, now)
	}
	if _, err := t.db.Statement.ConnPool.ExecContext(ctx, q.String(), args...); err != nil {
		return fmt.Errorf("insert %d product keys: %w", len(ps), err)
	}
	return nil
}

// deadlock wraps err in product.ErrDeadlock when it is InnoDB's answer to a
// deadlock: the transaction was rolled back whole, and running it again is
// safe.
func deadlock(err error) error {
	if database.IsDeadlock(err) {
		return fmt.Errorf("%w: %w", product.ErrDeadlock, err)
	}
	return err
}

// quiet returns db without statement error logging: a duplicate key on a
// request id is the expected answer of a resubmitted request, not an error
// to log.
func quiet(db *gorm.DB) *gorm.DB {
	return db.Session(&gorm.Session{Logger: db.Logger.LogMode(logger.Silent)})
}

// keyTuples renders keys as "(name, model) IN ((?,?),...)" arguments.
func keyTuples(keys []product.Key) (string, []any) {
	var b strings.Builder
	args := make([]any, 0, 2*len(keys))
	b.WriteString("(name, model) IN (")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("(?,?)")
		args = append(args, k.Name, k.Model)
	}
	b.WriteString(")")
	return b.String(), args
}
