package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/services/order/internal/order"
)

// Catalog reads the live products among ids (see order.Store).
func (s *Store) Catalog(ctx context.Context, ids []uint64) (map[uint64]order.CatalogEntry, error) {
	return catalog(ctx, s.db, ids, false)
}

// Catalog reads the live products among ids under a shared lock (see
// order.Tx): a concurrent deletion of one of them waits for this
// transaction, and this read sees the latest committed rows.
func (t *orderTx) Catalog(ctx context.Context, ids []uint64) (map[uint64]order.CatalogEntry, error) {
	return catalog(ctx, t.db, ids, true)
}

func catalog(ctx context.Context, db *gorm.DB, ids []uint64, lock bool) (map[uint64]order.CatalogEntry, error) {
	out := make(map[uint64]order.CatalogEntry, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	q := "SELECT id, name, price FROM products WHERE id IN ? AND deleted = 0"
	if lock {
		q += " LOCK IN SHARE MODE"
	}
	var rows []struct {
		ID    uint64
		Name  string
		Price int64
	}
	if err := db.WithContext(ctx).Raw(q, ids).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("read %d products: %w", len(ids), err)
	}
	for _, r := range rows {
		out[r.ID] = order.CatalogEntry{ProductID: r.ID, Name: r.Name, Price: r.Price}
	}
	return out, nil
}

// DecrementStock is incident 5's fix: the check and the write are one
// statement, evaluated on the row's latest committed value under its row
// lock, so concurrent orders take units one after the other and the last
// ones find too few. The version grows with every write, so a changed row
// is always counted in rows affected.
func (t *orderTx) DecrementStock(ctx context.Context, productID uint64, n int) (bool, error) {
	res := t.db.WithContext(ctx).Exec(`UPDATE product_stock SET available = available - ?, version = version + 1, updated_at = ?
		WHERE product_id = ? AND available >= ?`, n, time.Now().UTC(), productID, n)
	if res.Error != nil {
		return false, fmt.Errorf("take %d units of product %d: %w", n, productID, res.Error)
	}
	switch res.RowsAffected {
	case 0:
		return false, nil
	case 1:
		return true, nil
	}
	return false, fmt.Errorf("take %d units of product %d: %d rows changed, want 0 or 1", n, productID, res.RowsAffected)
}

// stockRow is a row of product_stock.
type stockRow struct {
	ProductID uint64 `gorm:"primaryKey;autoIncrement:false"`
	Available int
	Version   uint64
	UpdatedAt time.Time
}

func (stockRow) TableName() string { return "product_stock" }

// ReadStock reads a product's stock without a lock: the read of the
// lab's broken and optimistic stock variants (services/order/lab).
func (t *orderTx) ReadStock(ctx context.Context, productID uint64) (order.Stock, error) {
	var row stockRow
	err := t.db.WithContext(ctx).Where("product_id = ?", productID).Take(&row).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return order.Stock{ProductID: productID}, nil
	case err != nil:
		return order.Stock{}, fmt.Errorf("read stock of product %d: %w", productID, err)
	}
	return order.Stock{ProductID: productID, Available: row.Available, Version: row.Version}, nil
}

// WriteStock overwrites a product's available units: the write of the
// lab's broken read-modify-write.
func (t *orderTx) WriteStock(ctx context.Context, productID uint64, available int) error {
	res := t.db.WithContext(ctx).Exec(`UPDATE product_stock SET available = ?, version = version + 1, updated_at = ? WHERE product_id = ?`,
		available, time.Now().UTC(), productID)
	if res.Error != nil {
		return fmt.Errorf("write stock of product %d: %w", productID, res.Error)
	}
	if res.RowsAffected != 1 {
		return fmt.Errorf("write stock of product %d: %d rows changed, want 1", productID, res.RowsAffected)
	}
	return nil
}

// SwapStock writes a product's available units if its version is the one
// in s: the lab's optimistic compare-and-set. The UPDATE reads the row's latest committed version
// under its row lock, so of two transactions that read the same version
// only the first to write changes the row.
func (t *orderTx) SwapStock(ctx context.Context, s order.Stock, available int) (bool, error) {
	res := t.db.WithContext(ctx).Exec(`UPDATE product_stock SET available = ?, version = version + 1, updated_at = ?
		WHERE product_id = ? AND version = ?`, available, time.Now().UTC(), s.ProductID, s.Version)
	if res.Error != nil {
		return false, fmt.Errorf("swap stock of product %d at version %d: %w", s.ProductID, s.Version, res.Error)
	}
	switch res.RowsAffected {
	case 0:
		return false, nil
	case 1:
		return true, nil
	}
	return false, fmt.Errorf("swap stock of product %d: %d rows changed, want 0 or 1", s.ProductID, res.RowsAffected)
}

// reservationRow is a row of stock_reservation.
type reservationRow struct {
	ID        uint64 `gorm:"primaryKey"`
	OrderNo   string
	ProductID uint64
	Quantity  int
	Status    string
	CreatedAt time.Time
	UpdatedAt time.Time
}

func (reservationRow) TableName() string { return "stock_reservation" }

// AddReservations inserts one RESERVED row per line.
func (t *orderTx) AddReservations(ctx context.Context, orderNo string, lines []order.Line, now time.Time) error {
	if len(lines) == 0 {
		return nil
	}
	rows := make([]reservationRow, len(lines))
	for i, l := range lines {
		rows[i] = reservationRow{OrderNo: orderNo, ProductID: l.ProductID, Quantity: l.Quantity, Status: string(order.Reserved), CreatedAt: now.UTC(), UpdatedAt: now.UTC()}
	}
	if err := t.db.WithContext(ctx).Create(&rows).Error; err != nil {
		return fmt.Errorf("reserve stock for order %s: %w", orderNo, err)
	}
	return nil
}

// ConfirmReservations moves the order's reservations RESERVED → CONFIRMED
// (see order.Tx) in one statement. FORCE INDEX makes the plan read the
// order's prefix of the unique key (database.ByKey), never a status index;
// at READ COMMITTED it locks those rows alone.
func (t *orderTx) ConfirmReservations(ctx context.Context, orderNo string, now time.Time) (int, error) {
	res := t.db.WithContext(ctx).Exec(`UPDATE stock_reservation FORCE INDEX (uk_stock_reservation_order_product) SET status = ?, updated_at = ?
		WHERE order_no = ? AND status = ?`, string(order.Confirmed), now.UTC(), orderNo, string(order.Reserved))
	if res.Error != nil {
		return 0, fmt.Errorf("confirm the reservations of order %s: %w", orderNo, res.Error)
	}
	return int(res.RowsAffected), nil
}

// ReleaseReservations moves each line's reservation RESERVED → RELEASED and
// gives its units back (see order.Tx). The units go back only when the
// reservation moved, so a second release gives nothing back.
func (t *orderTx) ReleaseReservations(ctx context.Context, orderNo string, lines []order.Line, now time.Time) (int, error) {
	moved := 0
	for _, l := range order.ByProduct(lines) {
		ok, err := t.moveReservation(ctx, orderNo, l.ProductID, order.Released, now)
		if err != nil {
			return moved, err
		}
		if !ok {
			continue
		}
		res := t.db.WithContext(ctx).Exec(`UPDATE product_stock SET available = available + ?, version = version + 1, updated_at = ? WHERE product_id = ?`,
			l.Quantity, now.UTC(), l.ProductID)
		if res.Error != nil {
			return moved, fmt.Errorf("give back %d units of product %d for order %s: %w", l.Quantity, l.ProductID, orderNo, res.Error)
		}
		if res.RowsAffected != 1 {
			return moved, fmt.Errorf("give back %d units of product %d for order %s: %d rows changed, want 1", l.Quantity, l.ProductID, orderNo, res.RowsAffected)
		}
		moved++
	}
	return moved, nil
}

// moveReservation moves the (order, product) reservation from RESERVED to
// next and reports whether it did. The WHERE names the whole unique key and
// FORCE INDEX makes the plan use it (database.ByKey; on a small table
// MariaDB would read idx_stock_reservation_product instead), so InnoDB
// locks that key's entry and the gap just before it, not the product's
// reservations; an order placed meanwhile that lands in that gap waits,
// holding nothing this transaction needs (placeInTx inserts its rows
// before it takes units).
func (t *orderTx) moveReservation(ctx context.Context, orderNo string, productID uint64, next order.ReservationStatus, now time.Time) (bool, error) {
	res := t.db.WithContext(ctx).Exec(`UPDATE stock_reservation FORCE INDEX (uk_stock_reservation_order_product) SET status = ?, updated_at = ?
		WHERE order_no = ? AND product_id = ? AND status = ?`, string(next), now.UTC(), orderNo, productID, string(order.Reserved))
	if res.Error != nil {
		return false, fmt.Errorf("reservation of product %d for order %s → %s: %w", productID, orderNo, next, res.Error)
	}
	switch res.RowsAffected {
	case 0:
		return false, nil
	case 1:
		return true, nil
	}
	return false, fmt.Errorf("reservation of product %d for order %s → %s: %d rows changed, want 0 or 1", productID, orderNo, next, res.RowsAffected)
}
