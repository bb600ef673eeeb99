package database_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// TestByKeyLocksOnlyTheRow: a state move "WHERE no = ? AND status = ?" on a
// small table with a status index. Read the way MariaDB plans it, through
// that index, under REPEATABLE READ (the server's default), the move locks
// the status range and its gaps, and a payment created meanwhile for another
// order waits on the mover's transaction (in the service, the waits crossed
// and became a deadlock). Through the row's unique key (database.ByKey) it
// locks that key's entry, not the status range, and the insert (whose key
// sorts after it) goes straight through. At READ COMMITTED, the isolation
// of every connection database.Open makes, neither plan locks a gap.
func TestByKeyLocksOnlyTheRow(t *testing.T) {
	db := testenv.DB(t)
	testenv.Must(t, db.Exec(`CREATE TABLE p (
		id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT, no VARCHAR(64) NOT NULL, status VARCHAR(16) NOT NULL,
		created_at DATETIME(3) NOT NULL,
		PRIMARY KEY (id), UNIQUE KEY uk_p_no (no), KEY idx_p_status_created (status, created_at)
	) ENGINE=InnoDB`).Error)
	testenv.Must(t, db.Exec("INSERT INTO p (no, status, created_at) VALUES ('A', 'PAID', NOW(3)), ('B', 'WAIT_PAY', NOW(3))").Error)
	if key := testenv.KeyUsed(t, db, "UPDATE p SET status = 'CLOSED' WHERE no = 'B' AND status = 'WAIT_PAY'"); key != "idx_p_status_created" {
		t.Fatalf("MariaDB's own plan reads %q; this test needs a server whose plan reads the status index", key)
	}

	ownPlan := func(tx *gorm.DB) *gorm.DB { return tx.Table("p") }
	byKey := func(tx *gorm.DB) *gorm.DB { return database.ByKey(tx, "p", "uk_p_no") }
	for i, c := range []struct {
		name      string
		isolation sql.IsolationLevel
		table     func(*gorm.DB) *gorm.DB
		blocks    bool
	}{
		{"own plan, repeatable read", sql.LevelRepeatableRead, ownPlan, true},
		{"ByKey, repeatable read", sql.LevelRepeatableRead, byKey, false},
		{"own plan, the pool's read committed", sql.LevelDefault, ownPlan, false},
		{"ByKey, the pool's read committed", sql.LevelDefault, byKey, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			testenv.Must(t, db.Exec("UPDATE p SET status = 'WAIT_PAY' WHERE no = 'B'").Error)
			tx := db.WithContext(ctx).Begin(&sql.TxOptions{Isolation: c.isolation})
			defer tx.Rollback()
			res := c.table(tx).Where("no = ? AND status = ?", "B", "WAIT_PAY").Updates(map[string]any{"status": "CLOSED"})
			testenv.Must(t, res.Error)
			if res.RowsAffected != 1 {
				t.Fatalf("the move changed %d rows", res.RowsAffected)
			}
			// Another order's payment, created while the move is open, on a
			// connection that gives up waiting after a second.
			err := db.WithContext(ctx).Connection(func(other *gorm.DB) error {
				if err := other.Exec("SET SESSION innodb_lock_wait_timeout = 1").Error; err != nil {
					return err
				}
				return other.Exec("INSERT INTO p (no, status, created_at) VALUES (?, 'WAIT_PAY', NOW(3))", string(rune('C'+i))).Error
			})
			var me *mysql.MySQLError
			waited := errors.As(err, &me) && me.Number == 1205 // ER_LOCK_WAIT_TIMEOUT
			if err != nil && !waited {
				t.Fatal(err)
			}
			if waited != c.blocks {
				t.Fatalf("the insert waited on the move: %v, want %v", waited, c.blocks)
			}
		})
	}
}
