package database_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/lab/fault"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// isolation reads the session isolation of conn from whichever variable the
// server has: tx_isolation (MariaDB 10.11), transaction_isolation (MySQL 8,
// MariaDB 11.1+), or both.
func isolation(t *testing.T, ctx context.Context, conn *sql.Conn) string {
	t.Helper()
	rows, err := conn.QueryContext(ctx, "SHOW SESSION VARIABLES WHERE Variable_name IN ('tx_isolation', 'transaction_isolation')")
	testenv.Must(t, err)
	defer rows.Close()
	var values []string
	for rows.Next() {
		var name, value string
		testenv.Must(t, rows.Scan(&name, &value))
		values = append(values, value)
	}
	testenv.Must(t, rows.Err())
	if len(values) == 0 {
		t.Fatal("the server has neither tx_isolation nor transaction_isolation")
	}
	for _, v := range values[1:] {
		if v != values[0] {
			t.Fatalf("the server's isolation variables disagree: %v", values)
		}
	}
	return values[0]
}

// TestOpenMakesEveryConnectionReadCommitted: every connection of the pool,
// including one the pool makes after the server killed the first, is READ
// COMMITTED, the server's default (REPEATABLE READ) notwithstanding; and so
// is a pool opened through another registered driver (DriverName, the lab's
// fault-injecting one), which is still in the path.
func TestOpenMakesEveryConnectionReadCommitted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg, name := testenv.NewDatabase(t)
	faultDriver := "mysql-isolation-" + testenv.RandomSuffix(8)
	inj, err := fault.Register(faultDriver)
	testenv.Must(t, err)
	for _, driverName := range []string{"", faultDriver} {
		t.Run("driver="+driverName, func(t *testing.T) {
			cfg := cfg
			cfg.DriverName = driverName
			cfg.MaxOpenConns = 4
			db, err := database.Open(ctx, cfg, name, testenv.Logger(t))
			testenv.Must(t, err)
			defer database.Close(db)
			pool, err := db.DB()
			testenv.Must(t, err)
			// Hold four connections at once, so the pool has to make four.
			var conns []*sql.Conn
			for range 4 {
				c, err := pool.Conn(ctx)
				testenv.Must(t, err)
				defer c.Close()
				conns = append(conns, c)
			}
			for i, c := range conns {
				if got := isolation(t, ctx, c); got != "READ-COMMITTED" {
					t.Fatalf("connection %d of the pool: isolation %s, want READ-COMMITTED", i, got)
				}
			}
			var id int64
			testenv.Must(t, conns[0].QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id))
			for _, c := range conns {
				c.Close()
			}
			testenv.Must(t, db.Exec("KILL ?", id).Error)
			// The killed connection is discarded; whatever connection
			// serves these reads, new or kept, is READ COMMITTED.
			for range 8 {
				c, err := pool.Conn(ctx)
				testenv.Must(t, err)
				if got := isolation(t, ctx, c); got != "READ-COMMITTED" {
					t.Fatalf("after a connection was killed: isolation %s, want READ-COMMITTED", got)
				}
				c.Close()
			}
			if driverName != "" {
				before := inj.Stats().Commits
				testenv.Must(t, db.Exec("CREATE TABLE IF NOT EXISTS t (k INT PRIMARY KEY)").Error)
				testenv.Must(t, db.Transaction(func(tx *gorm.DB) error { return tx.Exec("INSERT INTO t VALUES (1)").Error }))
				if inj.Stats().Commits != before+1 {
					t.Fatalf("the commit did not go through driver %s: commits %d → %d", driverName, before, inj.Stats().Commits)
				}
			}
		})
	}
}

// TestTransactionSendsNoIsolationStatement: a transaction begun without
// options sends no SET of its own (the connection is READ COMMITTED
// already), while one that asks for an isolation still sends it. Counted
// by the server (Com_set_option) on a pool of one connection, so every
// statement counted is the test's.
func TestTransactionSendsNoIsolationStatement(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg, name := testenv.NewDatabase(t)
	cfg.MaxOpenConns = 1
	db, err := database.Open(ctx, cfg, name, testenv.Logger(t))
	testenv.Must(t, err)
	defer database.Close(db)
	testenv.Must(t, db.Exec("CREATE TABLE t (k INT PRIMARY KEY)").Error)
	sets := func() int64 {
		var name string
		var n int64
		testenv.Must(t, db.Raw("SHOW SESSION STATUS LIKE 'Com_set_option'").Row().Scan(&name, &n))
		return n
	}
	before := sets()
	testenv.Must(t, db.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return tx.Exec("INSERT INTO t VALUES (1)").Error }))
	if n := sets() - before; n != 0 {
		t.Fatalf("a transaction without options sent %d SET statements, want none", n)
	}
	before = sets()
	testenv.Must(t, db.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return tx.Exec("INSERT INTO t VALUES (2)").Error },
		&sql.TxOptions{Isolation: sql.LevelReadCommitted}))
	if n := sets() - before; n != 1 {
		t.Fatalf("a transaction asking for READ COMMITTED sent %d SET statements; the counter does not see them, so the check above proves nothing", n)
	}
}
