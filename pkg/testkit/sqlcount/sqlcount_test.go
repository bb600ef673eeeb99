package sqlcount_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/testkit/sqlcount"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// server is what the server counted for one connection (SHOW SESSION
// STATUS).
type server struct {
	conn                                 int64
	questions, begins, commits, rollback int64
	selects, inserts, updates, sets      int64
	prepares, executes                   int64
}

func (s server) sub(b server) server {
	return server{s.conn, s.questions - b.questions, s.begins - b.begins, s.commits - b.commits, s.rollback - b.rollback,
		s.selects - b.selects, s.inserts - b.inserts, s.updates - b.updates, s.sets - b.sets, s.prepares - b.prepares, s.executes - b.executes}
}

// status reads the session status of db's only connection, and its id.
func status(t *testing.T, db *gorm.DB) server {
	t.Helper()
	rows, err := db.Raw("SHOW SESSION STATUS WHERE Variable_name IN ('Questions', 'Com_begin', 'Com_commit', 'Com_rollback', 'Com_select', 'Com_insert', 'Com_update', 'Com_set_option', 'Com_stmt_prepare', 'Com_stmt_execute')").Rows()
	testenv.Must(t, err)
	defer rows.Close()
	var s server
	for rows.Next() {
		var name string
		var v int64
		testenv.Must(t, rows.Scan(&name, &v))
		*map[string]*int64{"Questions": &s.questions, "Com_begin": &s.begins, "Com_commit": &s.commits, "Com_rollback": &s.rollback,
			"Com_select": &s.selects, "Com_insert": &s.inserts, "Com_update": &s.updates, "Com_set_option": &s.sets,
			"Com_stmt_prepare": &s.prepares, "Com_stmt_execute": &s.executes}[name] = v
	}
	testenv.Must(t, rows.Err())
	return s
}

// TestCountsWhatTheServerCounts: a mix of what a service sends (statements
// with arguments, gorm transactions with and without an isolation level,
// a commit and a rollback, a prepared statement run twice), sent over one
// connection, is counted as the server counts that connection's session:
// Statements as its Questions, each verb as its Com_ counter.
func TestCountsWhatTheServerCounts(t *testing.T) {
	cfg, name := testenv.NewDatabase(t)
	cfg.MaxOpenConns, cfg.MaxIdleConns, cfg.ConnMaxLifetime = 1, 1, time.Hour
	db, n := sqlcount.Open(t, cfg, name)
	testenv.Must(t, db.Exec("CREATE TABLE t (id BIGINT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(64) NOT NULL)").Error)

	before, counted := status(t, db), n.Counts()
	for _, v := range []string{"a", "b", "c"} {
		testenv.Must(t, db.Exec("INSERT INTO t (v) VALUES (?)", v).Error)
	}
	var total int64
	testenv.Must(t, db.Raw("SELECT COUNT(*) FROM t WHERE v <> ?", "z").Row().Scan(&total))
	testenv.Must(t, db.Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec("INSERT INTO t (v) VALUES (?)", "d").Error; err != nil {
			return err
		}
		return tx.Exec("UPDATE t SET v = ? WHERE v = ?", "e", "a").Error
	}))
	refused := errors.New("refused")
	err := db.Transaction(func(tx *gorm.DB) error {
		var id int64
		if err := tx.Raw("SELECT id FROM t WHERE v = ? FOR UPDATE", "b").Row().Scan(&id); err != nil {
			return err
		}
		return refused
	}, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if !errors.Is(err, refused) {
		t.Fatalf("rolled back transaction: %v", err)
	}
	srv, got := status(t, db).sub(before), n.Counts().Sub(counted)
	// 3 INSERT, 1 SELECT; START, INSERT, UPDATE, COMMIT; SET, START,
	// SELECT, ROLLBACK; the second SHOW.
	if got.Statements != 13 || got.Statements != srv.questions {
		t.Fatalf("counted %s; the server counted %d questions, want 13 each", got, srv.questions)
	}
	for verb, want := range map[string]int64{"INSERT": srv.inserts, "SELECT": srv.selects, "UPDATE": srv.updates, "START": srv.begins, "COMMIT": srv.commits, "ROLLBACK": srv.rollback, "SET": srv.sets, "SHOW": 1} {
		if got.Verbs[verb] != want {
			t.Errorf("counted %d %s, the server %d (%s)", got.Verbs[verb], verb, want, got)
		}
	}
	if got.Transactions != 2 || got.Commits != 1 || got.Rollbacks != 1 || got.Prepares != 0 {
		t.Errorf("counted %s, want 2 transactions, 1 commit, 1 rollback, nothing prepared", got)
	}

	// A prepared statement: one prepare, not a statement; two runs, two.
	before, counted = status(t, db), n.Counts()
	sqlDB, err := db.DB()
	testenv.Must(t, err)
	stmt, err := sqlDB.PrepareContext(context.Background(), "SELECT v FROM t WHERE id = ?")
	testenv.Must(t, err)
	for id := range 2 {
		var v string
		if err := stmt.QueryRow(id + 1).Scan(&v); err != nil && !errors.Is(err, sql.ErrNoRows) {
			t.Fatal(err)
		}
	}
	testenv.Must(t, stmt.Close())
	srv, got = status(t, db).sub(before), n.Counts().Sub(counted)
	if got.Prepares != 1 || got.Prepares != srv.prepares || got.Statements != 3 || got.Statements != srv.questions || srv.executes != 2 {
		t.Fatalf("counted %s; the server %d prepares, %d executes, %d questions; want 1 prepare and 3 statements (2 runs and the SHOW)", got, srv.prepares, srv.executes, srv.questions)
	}
}

// TestCountsEveryStatementOfConcurrentCallers: 50 goroutines on a pool of
// several connections, 20 statements each, every one counted once; the
// handle of Of counts, the handle it was made from does not.
func TestCountsEveryStatementOfConcurrentCallers(t *testing.T) {
	plain := testenv.DB(t)
	db, n := sqlcount.Of(t, plain)
	testenv.Must(t, plain.Exec("SELECT 1").Error)
	sqlDB, err := db.DB()
	testenv.Must(t, err)
	opened := func() int64 {
		st := sqlDB.Stats()
		return int64(st.OpenConnections) + st.MaxIdleClosed + st.MaxIdleTimeClosed + st.MaxLifetimeClosed
	}
	before := opened()
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			for range 20 {
				if err := db.Exec("DO 1").Error; err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	// Each connection the pool opened for the callers sent its one
	// session SET (database.Open's READ COMMITTED) before its first DO:
	// those are counted too, and nothing else is.
	got, fresh := n.Counts(), opened()-before
	if got.Verbs["DO"] != 1000 || got.Verbs["SET"] != fresh || got.Statements != 1000+fresh || got.Transactions != 0 {
		t.Fatalf("counted %s; the pool opened %d connections; want 1000 DO statements, one SET per connection and nothing else", got, fresh)
	}
}
