package testenv

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Recorder keeps the SQL of every statement run through the session
// RecordSQL returned, with its arguments inlined, so that a test can ask
// the database how it runs what the code really sent.
type Recorder struct {
	logger.Interface
	mu  sync.Mutex
	sql []string
}

// RecordSQL returns a session of db whose statements r records.
func RecordSQL(db *gorm.DB) (*gorm.DB, *Recorder) {
	r := &Recorder{Interface: logger.Discard}
	return db.Session(&gorm.Session{Logger: r}), r
}

// LogMode keeps the recorder in place when a caller changes the level (a
// store that silences expected errors).
func (r *Recorder) LogMode(logger.LogLevel) logger.Interface { return r }

// Trace records one statement.
func (r *Recorder) Trace(_ context.Context, _ time.Time, fc func() (string, int64), _ error) {
	s, _ := fc()
	r.mu.Lock()
	r.sql = append(r.sql, s)
	r.mu.Unlock()
}

// Take returns the statements recorded since the last Take whose text
// starts with verb (UPDATE, DELETE …), and forgets all of them.
func (r *Recorder) Take(verb string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, s := range r.sql {
		if strings.HasPrefix(strings.ToUpper(strings.TrimSpace(s)), verb) {
			out = append(out, s)
		}
	}
	r.sql = nil
	return out
}

// KeyUsed is the index MariaDB's plan for the single-table statement stmt
// reads its rows by (EXPLAIN's key column; "" for a full scan).
func KeyUsed(t testing.TB, db *gorm.DB, stmt string) string {
	t.Helper()
	var key sql.NullString
	rows, err := db.Raw("EXPLAIN " + stmt).Rows()
	if err != nil {
		t.Fatalf("testenv: explain %s: %v", stmt, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	if !rows.Next() {
		t.Fatalf("testenv: explain %s: no plan", stmt)
	}
	vals := make([]any, len(cols))
	for i, c := range cols {
		if c == "key" {
			vals[i] = &key
		} else {
			vals[i] = new(sql.RawBytes)
		}
	}
	if err := rows.Scan(vals...); err != nil {
		t.Fatal(err)
	}
	return key.String
}

// RequireKeyed fails t unless every statement in stmts reads its rows by
// the primary key or a unique key (an index named uk_…), which is how a
// state-machine update must find the one row it moves (database.ByKey).
// want is how many statements the caller expects, so that a test whose
// calls sent nothing cannot pass.
func RequireKeyed(t testing.TB, db *gorm.DB, stmts []string, want int) {
	t.Helper()
	if len(stmts) != want {
		t.Fatalf("%d statements recorded, want %d: %q", len(stmts), want, stmts)
	}
	for _, s := range stmts {
		if key := KeyUsed(t, db, s); key != "PRIMARY" && !strings.HasPrefix(key, "uk_") {
			t.Errorf("the plan reads by %q, not by the row's key: %s", key, s)
		}
	}
}

// LockWaits counts the statements on db's database waiting for a row
// lock: how a test sees that a request it holds back is inside its
// transaction, blocked where the test wants it. A waiting transaction
// shows in INNODB_TRX as LOCK WAIT, except when it does not: on a busy
// machine MariaDB 10.11 has listed no row for a transaction blocked in an
// UPDATE for a minute. So a statement of another connection still
// running after a second (PROCESSLIST, which did show it) counts too: the
// tests hold a row, and nothing else they run takes that long.
func LockWaits(t testing.TB, db *gorm.DB) int64 {
	t.Helper()
	var n int64
	Must(t, db.Raw(`SELECT COUNT(*) FROM information_schema.PROCESSLIST p
		LEFT JOIN information_schema.INNODB_TRX x ON x.trx_mysql_thread_id = p.ID
		WHERE p.DB = DATABASE() AND p.ID <> CONNECTION_ID() AND p.COMMAND = 'Query'
		AND (x.trx_state = 'LOCK WAIT' OR p.TIME_MS > 1000)`).Row().Scan(&n))
	return n
}
