package faultproxy_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/lab/faultproxy"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// startProxy runs a proxy in front of the test MySQL server on a free port and
// returns it with the database settings that go through it and those that go
// straight to the server, both on one fresh database.
func startProxy(t testing.TB) (p *faultproxy.Proxy, via, direct database.Config, dbName string) {
	t.Helper()
	direct, dbName = testenv.NewDatabase(t)
	cfg := faultproxy.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Upstream = direct.Addr
	cfg.ReplyTimeout = 10 * time.Second
	p, err := faultproxy.New(cfg, testenv.Logger(t), prometheus.NewRegistry())
	testenv.Must(t, err)
	addr, err := p.Listen()
	testenv.Must(t, err)
	t.Cleanup(func() { _ = p.Close() })
	via = direct
	via.Addr = addr.String()
	return p, via, direct, dbName
}

func openSQL(t *testing.T, cfg database.Config, dbName string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", cfg.DSN(dbName))
	testenv.Must(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func openGorm(t *testing.T, cfg database.Config, dbName string) *gorm.DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := database.Open(ctx, cfg, dbName, testenv.Logger(t))
	testenv.Must(t, err)
	t.Cleanup(func() { _ = database.Close(db) })
	return db
}

// workload runs a deterministic mix of statements, transactions, prepared
// statements, errors and large values on db and returns a transcript of
// everything the client observed, and how many COMMITs it sent.
func workload(t *testing.T, db *sql.DB) (transcript []string, commits int) {
	t.Helper()
	ctx := context.Background()
	rec := func(format string, args ...any) { transcript = append(transcript, fmt.Sprintf(format, args...)) }
	must := func(err error) {
		t.Helper()
		testenv.Must(t, err)
	}
	_, err := db.ExecContext(ctx, `CREATE TABLE items (
		id BIGINT AUTO_INCREMENT PRIMARY KEY,
		name VARCHAR(64) NOT NULL UNIQUE,
		qty INT NOT NULL,
		payload MEDIUMBLOB NULL)`)
	must(err)

	countStmt, err := db.PrepareContext(ctx, "SELECT COUNT(*), COALESCE(SUM(qty), 0) FROM items WHERE qty > ?")
	must(err)
	defer countStmt.Close()

	for i := range 300 {
		name := fmt.Sprintf("item-%03d", i)
		switch i % 7 {
		case 0: // a prepared insert outside a transaction
			res, err := db.ExecContext(ctx, "INSERT INTO items (name, qty) VALUES (?, ?)", name, i)
			must(err)
			id, _ := res.LastInsertId()
			n, _ := res.RowsAffected()
			rec("insert %s id=%d rows=%d", name, id, n)
		case 1: // a committed transaction
			tx, err := db.BeginTx(ctx, nil)
			must(err)
			_, err = tx.ExecContext(ctx, "INSERT INTO items (name, qty) VALUES (?, ?)", name, i*2)
			must(err)
			res, err := tx.ExecContext(ctx, "UPDATE items SET qty = qty + 1 WHERE qty < ?", i)
			must(err)
			n, _ := res.RowsAffected()
			must(tx.Commit())
			commits++
			rec("tx commit %s updated=%d", name, n)
		case 2: // a rolled-back transaction
			tx, err := db.BeginTx(ctx, nil)
			must(err)
			_, err = tx.ExecContext(ctx, "INSERT INTO items (name, qty) VALUES (?, ?)", name, 1)
			must(err)
			must(tx.Rollback())
			rec("tx rollback %s", name)
		case 3: // a reused prepared query
			var n, sum int64
			must(countStmt.QueryRowContext(ctx, i/2).Scan(&n, &sum))
			rec("count>%d n=%d sum=%d", i/2, n, sum)
		case 4: // a text-protocol query with several rows, and a server error
			rows, err := db.QueryContext(ctx, "SELECT id, name, qty FROM items ORDER BY qty DESC, id LIMIT 5")
			must(err)
			for rows.Next() {
				var id, qty int64
				var n string
				must(rows.Scan(&id, &n, &qty))
				rec("row %d %s %d", id, n, qty)
			}
			must(rows.Err())
			rows.Close()
			_, err = db.ExecContext(ctx, "INSERT INTO items (name, qty) VALUES ('item-000', 0)")
			var me *mysql.MySQLError
			if !errors.As(err, &me) {
				t.Fatalf("duplicate insert: %v", err)
			}
			rec("error %d", me.Number)
		case 5: // a value large enough to span many TCP reads both ways
			payload := strings.Repeat(fmt.Sprintf("%03d", i), 100_000)
			tx, err := db.BeginTx(ctx, nil)
			must(err)
			_, err = tx.ExecContext(ctx, "INSERT INTO items (name, qty, payload) VALUES (?, ?, ?)", name, i, payload)
			must(err)
			must(tx.Commit())
			commits++
			var back []byte
			must(db.QueryRowContext(ctx, "SELECT payload FROM items WHERE name = ?", name).Scan(&back))
			sum := sha256.Sum256(back)
			rec("blob %s len=%d sha=%s", name, len(back), hex.EncodeToString(sum[:8]))
		case 6: // an explicit COMMIT statement on a pinned connection
			conn, err := db.Conn(ctx)
			must(err)
			_, err = conn.ExecContext(ctx, "START TRANSACTION")
			must(err)
			_, err = conn.ExecContext(ctx, "INSERT INTO items (name, qty) VALUES (?, ?)", name, 7)
			must(err)
			_, err = conn.ExecContext(ctx, "/* explicit */ commit")
			must(err)
			commits++
			conn.Close()
			rec("explicit commit %s", name)
		}
	}

	// One query of exactly 0xFFFFFF payload bytes, which the client sends as
	// a full packet followed by an empty one.
	prefix, suffix := "SELECT LENGTH('", "')"
	pad := strings.Repeat("z", 1<<24-1-1-len(prefix)-len(suffix))
	var n int64
	must(db.QueryRowContext(ctx, prefix+pad+suffix).Scan(&n))
	rec("multi-packet length=%d", n)

	var dump string
	must(db.QueryRowContext(ctx, "SELECT SHA2(GROUP_CONCAT(CONCAT_WS(':', id, name, qty, SHA2(COALESCE(payload, ''), 256)) ORDER BY id), 256) FROM items").Scan(&dump))
	rec("table %s", dump)
	return transcript, commits
}

func TestPassthroughWorkloadIsUnchanged(t *testing.T) {
	p, via, _, viaDB := startProxy(t)
	direct, directDB := testenv.NewDatabase(t)

	want, wantCommits := workload(t, openSQL(t, direct, directDB))
	got, _ := workload(t, openSQL(t, via, viaDB))

	if len(got) != len(want) {
		t.Fatalf("transcript through the proxy has %d lines, direct %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("line %d differs:\n proxy:  %s\n direct: %s", i, got[i], want[i])
		}
	}
	st := p.Stats()
	if st.CommitsSeen != int64(wantCommits) || st.AcksDropped != 0 || st.OpaqueConnections != 0 {
		t.Fatalf("stats = %+v, want %d commits seen, none dropped, none opaque", st, wantCommits)
	}
}

func TestArmedDropLosesExactlyOneCommitAck(t *testing.T) {
	p, via, direct, dbName := startProxy(t)
	viaDB, directDB := openSQL(t, via, dbName), openSQL(t, direct, dbName)
	_, err := directDB.Exec("CREATE TABLE t (id BIGINT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(32) NOT NULL)")
	testenv.Must(t, err)

	commit := func(v string) error {
		tx, err := viaDB.Begin()
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		if _, err := tx.Exec("INSERT INTO t (v) VALUES (?)", v); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		return tx.Commit()
	}

	p.Arm(1)
	err = commit("lost")
	if !errors.Is(err, mysql.ErrInvalidConn) {
		t.Fatalf("commit through an armed proxy: err = %v, want %v", err, mysql.ErrInvalidConn)
	}
	var n int
	testenv.Must(t, directDB.QueryRow("SELECT COUNT(*) FROM t WHERE v = 'lost'").Scan(&n))
	if n != 1 {
		t.Fatalf("rows for the commit whose ack was lost = %d, want 1: the server must have committed", n)
	}
	for i := range 3 {
		if err := commit(fmt.Sprintf("ok-%d", i)); err != nil {
			t.Fatalf("commit %d after the single armed drop: %v", i, err)
		}
	}
	testenv.Must(t, directDB.QueryRow("SELECT COUNT(*) FROM t").Scan(&n))
	if n != 4 {
		t.Fatalf("rows = %d, want 4", n)
	}
	st := p.Stats()
	if st.CommitsSeen != 4 || st.AcksDropped != 1 || st.Armed != 0 {
		t.Fatalf("stats = %+v, want 4 commits seen, 1 ack dropped, 0 armed", st)
	}
}

func TestGormTransactionCommitsWhileTheClientGetsAnError(t *testing.T) {
	p, via, direct, dbName := startProxy(t)
	db := openGorm(t, via, dbName)
	directDB := openSQL(t, direct, dbName)
	testenv.Must(t, db.Exec("CREATE TABLE t (id BIGINT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(32) NOT NULL)").Error)

	insert := func(v string) error {
		return db.Transaction(func(tx *gorm.DB) error {
			return tx.Exec("INSERT INTO t (v) VALUES (?)", v).Error
		})
	}

	p.Arm(2)
	var results []error
	for i := range 5 {
		results = append(results, insert(fmt.Sprintf("v-%d", i)))
	}
	for i, err := range results {
		if i < 2 && !errors.Is(err, mysql.ErrInvalidConn) {
			t.Fatalf("transaction %d with a drop armed: err = %v, want %v", i, err, mysql.ErrInvalidConn)
		}
		if i >= 2 && err != nil {
			t.Fatalf("transaction %d after both drops: %v", i, err)
		}
	}
	var n int
	testenv.Must(t, directDB.QueryRow("SELECT COUNT(*) FROM t").Scan(&n))
	if n != 5 {
		t.Fatalf("rows = %d, want 5: the two failed transactions committed too", n)
	}
	if st := p.Stats(); st.AcksDropped != 2 || st.CommitsSeen != 5 {
		t.Fatalf("stats = %+v, want 2 acks dropped of 5 commits", st)
	}
}

// TestArmingWhileClientsCommit races committing clients against a goroutine
// arming one drop at a time: exactly as many commits fail as were armed, and
// every transaction, failed or not, is in the table.
func TestArmingWhileClientsCommit(t *testing.T) {
	p, via, direct, dbName := startProxy(t)
	db := openGorm(t, via, dbName)
	directDB := openSQL(t, direct, dbName)
	testenv.Must(t, db.Exec("CREATE TABLE t (id BIGINT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(32) NOT NULL)").Error)
	const (
		workers = 16
		arms    = 5
	)

	var (
		stop               atomic.Bool
		attempts, failures atomic.Int64
		wg                 sync.WaitGroup
		otherErr           atomic.Value
	)
	for w := range workers {
		wg.Go(func() {
			for !stop.Load() {
				attempts.Add(1)
				err := db.Transaction(func(tx *gorm.DB) error {
					return tx.Exec("INSERT INTO t (v) VALUES (?)", fmt.Sprintf("w%d", w)).Error
				})
				switch {
				case err == nil:
				case errors.Is(err, mysql.ErrInvalidConn):
					failures.Add(1)
				default:
					otherErr.Store(err)
					return
				}
			}
		})
	}
	deadline := time.Now().Add(30 * time.Second)
	for range arms {
		p.Arm(1)
		for p.Stats().Armed != 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	stop.Store(true)
	wg.Wait()

	if err := otherErr.Load(); err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	if got := failures.Load(); got != arms {
		t.Fatalf("failed commits = %d, want %d (stats %+v)", got, arms, p.Stats())
	}
	var n int64
	testenv.Must(t, directDB.QueryRow("SELECT COUNT(*) FROM t").Scan(&n))
	if n != attempts.Load() {
		t.Fatalf("rows = %d, want %d: every transaction committed", n, attempts.Load())
	}
	if st := p.Stats(); st.AcksDropped != arms || st.CommitsSeen != attempts.Load() {
		t.Fatalf("stats = %+v, want %d dropped of %d commits", st, arms, attempts.Load())
	}
}

func TestCloseCutsOpenConnections(t *testing.T) {
	p, via, _, dbName := startProxy(t)
	db := openSQL(t, via, dbName)
	testenv.Must(t, db.Ping())
	if st := p.Stats(); st.ActiveConnections != 1 {
		t.Fatalf("active connections = %d, want 1", st.ActiveConnections)
	}
	testenv.Must(t, p.Close())
	if st := p.Stats(); st.ActiveConnections != 0 {
		t.Fatalf("active connections after Close = %d, want 0", st.ActiveConnections)
	}
	if err := db.Ping(); err == nil {
		t.Fatal("ping through a closed proxy succeeded")
	}
}

func TestArmMatchingDropsOnlyTheMatchingTransaction(t *testing.T) {
	p, via, direct, dbName := startProxy(t)
	db := openGorm(t, via, dbName)
	directDB := openSQL(t, direct, dbName)
	testenv.Must(t, db.Exec("CREATE TABLE t (id BIGINT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(32) NOT NULL)").Error)
	testenv.Must(t, db.Exec("CREATE TABLE coupon_deduction (id BIGINT AUTO_INCREMENT PRIMARY KEY, order_no VARCHAR(32) NOT NULL)").Error)
	background := func() error {
		return db.Transaction(func(tx *gorm.DB) error { return tx.Exec("INSERT INTO t (v) VALUES ('bg')").Error })
	}
	deduct := func(no string) error {
		return db.Transaction(func(tx *gorm.DB) error {
			return tx.Exec("INSERT INTO coupon_deduction (order_no) VALUES (?)", no).Error
		})
	}

	p.ArmMatching(1, "coupon_deduction")
	for range 3 {
		testenv.Must(t, background())
	}
	if st := p.Stats(); st.Armed != 1 || st.Match != "coupon_deduction" {
		t.Fatalf("stats after unrelated commits = %+v, want still armed", st)
	}
	if err := deduct("o-1"); !errors.Is(err, mysql.ErrInvalidConn) {
		t.Fatalf("matching transaction: err = %v, want %v", err, mysql.ErrInvalidConn)
	}
	testenv.Must(t, deduct("o-2"))
	testenv.Must(t, background())
	var n int
	testenv.Must(t, directDB.QueryRow("SELECT COUNT(*) FROM coupon_deduction").Scan(&n))
	if n != 2 {
		t.Fatalf("deductions = %d, want 2: the one whose ack was lost committed", n)
	}
	if st := p.Stats(); st.AcksDropped != 1 || st.Armed != 0 || st.Match != "" || st.CommitsSeen != 6 {
		t.Fatalf("stats = %+v, want 1 dropped of 6 commits, disarmed", st)
	}
}
