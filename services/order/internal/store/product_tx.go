package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/logger"

	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/services/order/internal/catalog"
)

// copyItem is one template of a chunk and the product it should become.
type copyItem struct {
	templateID uint64
	product    catalog.Product
}

// chunkPlan splits a chunk's items into the first item of every key
// (candidates) and the later items repeating a key within the chunk.
type chunkPlan struct {
	candidates []copyItem
	repeats    []copyItem
}

func planChunk(items []copyItem) chunkPlan {
	var p chunkPlan
	seen := make(map[catalog.Key]bool, len(items))
	for _, it := range items {
		if seen[it.product.Key()] {
			p.repeats = append(p.repeats, it)
			continue
		}
		seen[it.product.Key()] = true
		p.candidates = append(p.candidates, it)
	}
	// Inserting keys in one global order keeps two chunks carrying the same
	// keys from locking them in opposite orders and deadlocking.
	slices.SortFunc(p.candidates, func(a, b copyItem) int {
		return strings.Compare(a.product.Name+"\x00"+a.product.Model, b.product.Name+"\x00"+b.product.Model)
	})
	return p
}

func (p chunkPlan) keys() []catalog.Key {
	keys := make([]catalog.Key, len(p.candidates))
	for i, it := range p.candidates {
		keys[i] = it.product.Key()
	}
	return keys
}

// missing returns the candidates whose key has no owner in existing: the
// products to create.
func (p chunkPlan) missing(existing map[catalog.Key]uint64) []copyItem {
	out := make([]copyItem, 0, len(p.candidates))
	for _, it := range p.candidates {
		if _, ok := existing[it.product.Key()]; !ok {
			out = append(out, it)
		}
	}
	return out
}

// duplicates lists the candidates whose key is in existing, and the repeats,
// which duplicate a candidate (created[key] when it was created).
func (p chunkPlan) duplicates(existing, created map[catalog.Key]uint64) []catalog.Duplicate {
	var dups []catalog.Duplicate
	for _, it := range p.candidates {
		if id, ok := existing[it.product.Key()]; ok {
			dups = append(dups, duplicate(it, id))
		}
	}
	for _, it := range p.repeats {
		id, ok := existing[it.product.Key()]
		if !ok {
			id = created[it.product.Key()]
		}
		dups = append(dups, duplicate(it, id))
	}
	return dups
}

func duplicate(it copyItem, existingID uint64) catalog.Duplicate {
	return catalog.Duplicate{TemplateID: it.templateID, Name: it.product.Name, Model: it.product.Model, ExistingID: existingID}
}

// CopyChunk processes one chunk in the store's transaction (see WithTx).
func (s *ProductStore) CopyChunk(ctx context.Context, c catalog.CopyChunk) (catalog.ChunkResult, bool, error) {
	db := s.db.WithContext(ctx)
	// Locking the chunk row serialises two deliveries of the same chunk; the
	// second one finds it processed and does nothing.
	var chunk productCopyChunkRow
	err := db.Clauses(clause.Locking{Strength: "UPDATE"}).Where("job_id = ? AND seq = ?", c.JobID, c.Seq).Take(&chunk).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return catalog.ChunkResult{}, false, fmt.Errorf("chunk %s/%d: %w", c.JobID, c.Seq, catalog.ErrNotFound)
	}
	if err != nil {
		return catalog.ChunkResult{}, false, fmt.Errorf("lock chunk %s/%d: %w", c.JobID, c.Seq, err)
	}
	if chunk.Status != chunkPending {
		return catalog.ChunkResult{}, false, nil
	}

	items, missing, err := s.chunkItems(ctx, c)
	if err != nil {
		return catalog.ChunkResult{}, false, err
	}
	onDup, err := catalog.ParseOnDuplicate(c.OnDuplicate)
	if err != nil {
		return catalog.ChunkResult{}, false, fmt.Errorf("chunk %s/%d: %w", c.JobID, c.Seq, err)
	}
	var res catalog.ChunkResult
	if s.cfg.Mode == catalog.ModeFixed {
		res, err = s.copyWithDedup(ctx, planChunk(items), onDup)
	} else {
		res, err = s.copyCheckThenInsert(ctx, planChunk(items), onDup)
	}
	if err != nil {
		return catalog.ChunkResult{}, false, fmt.Errorf("copy chunk %s/%d: %w", c.JobID, c.Seq, err)
	}
	if missing > 0 {
		res.Failed += missing
		res.Error = strings.TrimPrefix(res.Error+fmt.Sprintf("; %d template(s) no longer exist", missing), "; ")
	}
	if err := s.finishChunk(ctx, c, res); err != nil {
		return catalog.ChunkResult{}, false, err
	}
	return res, true, nil
}

// chunkItems loads the chunk's templates, in the chunk's order, as the
// products to create; it counts the templates that no longer exist.
func (s *ProductStore) chunkItems(ctx context.Context, c catalog.CopyChunk) ([]copyItem, int, error) {
	type tmpl struct {
		name, model string
		price       int64
	}
	byID := make(map[uint64]tmpl, len(c.TemplateIDs))
	if len(c.TemplateIDs) > 0 {
		var q strings.Builder
		q.WriteString("SELECT id, name, model, price FROM product_templates WHERE id IN (")
		args := make([]any, len(c.TemplateIDs))
		for i, id := range c.TemplateIDs {
			if i > 0 {
				q.WriteByte(',')
			}
			q.WriteByte('?')
			args[i] = id
		}
		q.WriteByte(')')
		err := queryRows(ctx, s.db, q.String(), args, func(rows *sql.Rows) error {
			var id uint64
			var t tmpl
			if err := rows.Scan(&id, &t.name, &t.model, &t.price); err != nil {
				return err
			}
			byID[id] = t
			return nil
		})
		if err != nil {
			return nil, 0, fmt.Errorf("load templates of chunk %s/%d: %w", c.JobID, c.Seq, err)
		}
	}
	items := make([]copyItem, 0, len(c.TemplateIDs))
	missing := 0
	for _, id := range c.TemplateIDs {
		t, ok := byID[id]
		if !ok {
			missing++
			continue
		}
		items = append(items, copyItem{templateID: id, product: catalog.Product{Brand: c.TargetBrand, Name: t.name, Model: t.model, Price: t.price}})
	}
	return items, missing, nil
}

// queryRows runs q on db's connection (the message's transaction) and calls
// scan for every row. The worker's reads go straight to the driver: gorm's
// Find reflects over the destination for every row, which on this path cost
// more CPU than the query.
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

// finishChunk records the chunk's result with a conditional update; exactly
// one row must change, or the chunk was processed twice.
func (s *ProductStore) finishChunk(ctx context.Context, c catalog.CopyChunk, r catalog.ChunkResult) error {
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
	res := s.db.WithContext(ctx).Model(&productCopyChunkRow{}).
		Where("job_id = ? AND seq = ? AND status = ?", c.JobID, c.Seq, chunkPending).
		Updates(map[string]any{
			"status": status, "created": r.Created, "skipped": r.Skipped, "failed": r.Failed,
			"error": truncate(r.Error, 1024), "duplicates": dups, "updated_at": s.now(),
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

// copyAttempts bounds how often a chunk re-reads the dedup table after losing
// a race for a key; each round sees the winners, so it converges quickly.
const copyAttempts = 5

// copyWithDedup is the fix: the products and their product_dedup rows are
// inserted together under a savepoint of the message's transaction. The
// unique (name, model) of product_dedup admits one live product per key
// whatever the concurrency; a loser's insert fails with a duplicate key, its
// part is rolled back, and the winners are read and reported.
func (s *ProductStore) copyWithDedup(ctx context.Context, p chunkPlan, onDup catalog.OnDuplicate) (catalog.ChunkResult, error) {
	db := s.db.WithContext(ctx)
	keys := p.keys()
	for attempt := range copyAttempts {
		// The first look is a plain read. After a lost race the winner has
		// committed, but a REPEATABLE READ snapshot taken earlier would not
		// show it, so later looks are locking reads, which always see the
		// latest committed rows. (The inbox runs READ COMMITTED, where both
		// see it; the store does not rely on that.)
		existing, err := s.dedupOwners(ctx, db, keys, attempt > 0)
		if err != nil {
			return catalog.ChunkResult{}, err
		}
		dups := p.duplicates(existing, nil)
		if onDup == catalog.FailOnDuplicate && len(dups) > 0 {
			return failAll(p, dups), nil
		}
		toCreate := p.missing(existing)
		if err := db.SavePoint("product_copy").Error; err != nil {
			return catalog.ChunkResult{}, fmt.Errorf("savepoint: %w", err)
		}
		created, err := s.insertProducts(db, toCreate, true)
		if database.IsDuplicateKey(err) {
			if err := db.RollbackTo("product_copy").Error; err != nil {
				return catalog.ChunkResult{}, fmt.Errorf("rollback to savepoint: %w", err)
			}
			continue
		}
		if err != nil {
			return catalog.ChunkResult{}, err
		}
		return catalog.ChunkResult{Created: len(toCreate), Skipped: len(dups), Duplicates: p.duplicates(existing, created)}, nil
	}
	return catalog.ChunkResult{}, errors.New("keys kept changing hands, giving up for this delivery")
}

// copyCheckThenInsert is the broken and orderly way, the story's consumer:
// read which keys have a live product, then insert the others. The read
// takes no lock and products has no unique key, so two workers copying the
// same keys at once both find them free and both insert: duplicate live
// products. With one worker (orderly) no two copies overlap and it holds.
func (s *ProductStore) copyCheckThenInsert(ctx context.Context, p chunkPlan, onDup catalog.OnDuplicate) (catalog.ChunkResult, error) {
	db := s.db.WithContext(ctx)
	existing, err := s.liveOwners(ctx, db, p.keys())
	if err != nil {
		return catalog.ChunkResult{}, err
	}
	dups := p.duplicates(existing, nil)
	if onDup == catalog.FailOnDuplicate && len(dups) > 0 {
		return failAll(p, dups), nil
	}
	toCreate := p.missing(existing)
	created, err := s.insertProducts(db, toCreate, false)
	if err != nil {
		return catalog.ChunkResult{}, err
	}
	return catalog.ChunkResult{Created: len(toCreate), Skipped: len(dups), Duplicates: p.duplicates(existing, created)}, nil
}

// failAll is the all-or-nothing answer: nothing of the chunk is created and
// every duplicate is named.
func failAll(p chunkPlan, dups []catalog.Duplicate) catalog.ChunkResult {
	return catalog.ChunkResult{Failed: len(p.candidates) + len(p.repeats), Error: catalog.DuplicatesError(dups), Duplicates: dups}
}

// insertProducts inserts items' products in one multi-row statement and,
// with dedup, their product_dedup rows in a second; it returns the new id of
// every key. The statements are built here and sent straight to the
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
func (s *ProductStore) insertProducts(db *gorm.DB, items []copyItem, dedup bool) (map[catalog.Key]uint64, error) {
	created := make(map[catalog.Key]uint64, len(items))
	if len(items) == 0 {
		return created, nil
	}
	ctx := db.Statement.Context
	now := s.now()
	var q strings.Builder
	q.WriteString("INSERT INTO products (brand, name, model, price, deleted, created_at, updated_at) VALUES ")
	args := make([]any, 0, 6*len(items))
	for i, it := range items {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString("(?,?,?,?,0,?,?)")
		p := toDBProduct(it.product, now)
		args = append(args, p.Brand, p.Name, p.Model, p.Price, p.CreatedAt, p.UpdatedAt)
	}
	res, err := db.Statement.ConnPool.ExecContext(ctx, q.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("insert %d products: %w", len(items), err)
	}
	first, err := res.LastInsertId()
	if err != nil {
		return nil, fmt.Errorf("insert %d products: id: %w", len(items), err)
	}
	if n, err := res.RowsAffected(); err != nil || n != int64(len(items)) {
		return nil, fmt.Errorf("insert %d products: %d rows inserted (%v)", len(items), n, err)
	}
	for i, it := range items {
		created[it.product.Key()] = uint64(first) + uint64(i)
	}
	last := items[len(items)-1].product
	var name, model string
	if err := db.Statement.ConnPool.QueryRowContext(ctx, "SELECT name, model FROM products WHERE id = ?", uint64(first)+uint64(len(items)-1)).Scan(&name, &model); err != nil || name != last.Name || model != last.Model {
		return nil, fmt.Errorf("insert %d products: ids from %d are not consecutive (auto_increment_increment must be 1): last row reads (%q, %q), err %v", len(items), first, name, model, err)
	}
	if !dedup {
		return created, nil
	}
	q.Reset()
	q.WriteString("INSERT INTO product_dedup (product_id, name, model, created_at) VALUES ")
	args = args[:0]
	for i, it := range items {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString("(?,?,?,?)")
		args = append(args, uint64(first)+uint64(i), it.product.Name, it.product.Model, now)
	}
	// A duplicate key here is the expected answer of a lost race: the
	// caller rolls back to its savepoint and reads the winners. Sent
	// outside gorm, it is not logged as a statement error either.
	if _, err := db.Statement.ConnPool.ExecContext(ctx, q.String(), args...); err != nil {
		return nil, fmt.Errorf("insert %d product keys: %w", len(items), err)
	}
	return created, nil
}

// quiet returns db without statement error logging: a duplicate key on a
// dedup row is the expected answer of a lost race, not an error to log.
func quiet(db *gorm.DB) *gorm.DB {
	return db.Session(&gorm.Session{Logger: db.Logger.LogMode(logger.Silent)})
}

// keyTuples renders keys as "(name, model) IN ((?,?),...)" arguments.
func keyTuples(keys []catalog.Key) (string, []any) {
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

// dedupOwners returns the product holding each key in product_dedup. With
// lock it is a locking read (LOCK IN SHARE MODE), which sees the latest
// committed rows rather than the transaction's snapshot.
func (s *ProductStore) dedupOwners(ctx context.Context, db *gorm.DB, keys []catalog.Key, lock bool) (map[catalog.Key]uint64, error) {
	owners := make(map[catalog.Key]uint64, len(keys))
	if len(keys) == 0 {
		return owners, nil
	}
	cond, args := keyTuples(keys)
	q := "SELECT product_id, name, model FROM product_dedup WHERE " + cond
	if lock {
		q += " LOCK IN SHARE MODE"
	}
	err := queryRows(ctx, db, q, args, func(rows *sql.Rows) error {
		var id uint64
		var k catalog.Key
		if err := rows.Scan(&id, &k.Name, &k.Model); err != nil {
			return err
		}
		owners[k] = id
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %d product keys: %w", len(keys), err)
	}
	return owners, nil
}

// liveOwners returns a live product for each key that has one (the oldest,
// when the broken mode has let several in).
func (s *ProductStore) liveOwners(ctx context.Context, db *gorm.DB, keys []catalog.Key) (map[catalog.Key]uint64, error) {
	owners := make(map[catalog.Key]uint64, len(keys))
	if len(keys) == 0 {
		return owners, nil
	}
	cond, args := keyTuples(keys)
	err := queryRows(ctx, db, "SELECT id, name, model FROM products WHERE deleted = 0 AND "+cond+" ORDER BY id", args, func(rows *sql.Rows) error {
		var id uint64
		var k catalog.Key
		if err := rows.Scan(&id, &k.Name, &k.Model); err != nil {
			return err
		}
		if _, ok := owners[k]; !ok {
			owners[k] = id
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read live products of %d keys: %w", len(keys), err)
	}
	return owners, nil
}
