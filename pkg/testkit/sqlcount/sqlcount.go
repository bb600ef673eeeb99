// Package sqlcount counts what code really sends to MySQL/MariaDB: the
// statements, transactions and commits of a pool opened as a service opens
// its own (database.Open), through the driver hooks of pkg/database/sqlhook.
// A test hands the counted *gorm.DB to the store, relay or use case under
// test, keeps another handle for its own statements, and asserts what the
// code sent ("a purchase sends at most N statements"):
//
//	counted, n := sqlcount.Of(t, db)
//	before := n.Counts()
//	... run the code on counted ...
//	got := n.Counts().Sub(before)
//	if got.Statements > 12 || got.Transactions != 1 { t.Fatalf("sent %s", got) }
//
// The figures are the server's: Statements matches the session's Questions
// status (the test of this package checks it), so they read like SHOW
// GLOBAL STATUS of a load test, one use case at a time.
package sqlcount

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/database/sqlhook"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// Counts is what a counted pool sent.
type Counts struct {
	// Statements is every statement the server received: the code's own
	// and the transaction control the driver sends for it (SET TRANSACTION
	// before a transaction with an isolation level, START TRANSACTION,
	// COMMIT, ROLLBACK). Each run of a prepared statement is one; the
	// prepare is not (the server's Questions status counts the same way).
	Statements int64
	// Prepares is the statements prepared: one more round trip each, and a
	// sign that a statement's arguments were not interpolated.
	Prepares int64
	// Transactions is the transactions begun; Commits and Rollbacks the
	// COMMIT and ROLLBACK statements that ended them.
	Transactions, Commits, Rollbacks int64
	// Verbs counts Statements by first keyword, upper-cased: SELECT,
	// INSERT, UPDATE, DELETE, SET, START, COMMIT, ROLLBACK, SHOW...
	Verbs map[string]int64
}

// Sub returns c minus before: what was sent between two readings.
func (c Counts) Sub(before Counts) Counts {
	d := Counts{
		Statements:   c.Statements - before.Statements,
		Prepares:     c.Prepares - before.Prepares,
		Transactions: c.Transactions - before.Transactions,
		Commits:      c.Commits - before.Commits,
		Rollbacks:    c.Rollbacks - before.Rollbacks,
		Verbs:        map[string]int64{},
	}
	for v, n := range c.Verbs {
		if n -= before.Verbs[v]; n != 0 {
			d.Verbs[v] = n
		}
	}
	return d
}

// String reads like "12 statements (1 COMMIT, 2 SELECT, ...), 0 prepared,
// 1 transaction (1 commit, 0 rollbacks)", for a failing test's message.
func (c Counts) String() string {
	verbs := make([]string, 0, len(c.Verbs))
	for _, v := range slices.Sorted(maps.Keys(c.Verbs)) {
		verbs = append(verbs, fmt.Sprintf("%d %s", c.Verbs[v], v))
	}
	return fmt.Sprintf("%d statements (%s), %d prepared, %d transactions (%d commits, %d rollbacks)",
		c.Statements, strings.Join(verbs, ", "), c.Prepares, c.Transactions, c.Commits, c.Rollbacks)
}

// Counter counts the statements of the pools it is under; it is safe for
// concurrent use.
type Counter struct {
	mu sync.Mutex
	c  Counts
}

// Counts returns the counts so far.
func (n *Counter) Counts() Counts {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.c
	c.Verbs = maps.Clone(n.c.Verbs)
	if c.Verbs == nil {
		c.Verbs = map[string]int64{}
	}
	return c
}

func (n *Counter) add(verb string, f func(*Counts)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.c.Verbs == nil {
		n.c.Verbs = map[string]int64{}
	}
	if verb != "" {
		n.c.Statements++
		n.c.Verbs[verb]++
	}
	if f != nil {
		f(&n.c)
	}
}

// hooks is a Counter seen as the hooks of its pool's connections, which
// keep no state of their own.
type hooks Counter

var _ sqlhook.ConnHooks = (*hooks)(nil)

func (h *hooks) NewConn(func() error) sqlhook.ConnHooks { return h }

func (h *hooks) counter() *Counter { return (*Counter)(h) }

func (h *hooks) Err() error { return nil }

func (h *hooks) Statement(query string, kind sqlhook.Kind, err error) error {
	if kind == sqlhook.Prepare {
		h.counter().add("", func(c *Counts) { c.Prepares++ })
	} else {
		h.counter().add(verb(query), nil)
	}
	return err
}

// Begin counts what go-sql-driver/mysql sends to begin: SET TRANSACTION
// ISOLATION LEVEL first when the transaction asks for a level, then START
// TRANSACTION.
func (h *hooks) Begin(opts driver.TxOptions) {
	if sql.IsolationLevel(opts.Isolation) != sql.LevelDefault {
		h.counter().add("SET", nil)
	}
	h.counter().add("START", func(c *Counts) { c.Transactions++ })
}

func (h *hooks) Commit(commit func() error) error {
	h.counter().add("COMMIT", func(c *Counts) { c.Commits++ })
	return commit()
}

func (h *hooks) Rollback(error) {
	h.counter().add("ROLLBACK", func(c *Counts) { c.Rollbacks++ })
}

// verb returns the first keyword of query, upper-cased.
func verb(query string) string {
	q := strings.TrimLeft(query, " \t\r\n(")
	end := strings.IndexFunc(q, func(r rune) bool { return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') })
	if end < 0 {
		end = len(q)
	}
	if end == 0 {
		return "OTHER"
	}
	return strings.ToUpper(q[:end])
}

// Open opens a pool on the database name at cfg, configured as
// database.Open configures a service's (cfg's pool sizes included), whose
// every statement is counted from the moment Open returns (what opening
// sent, such as gorm asking the server's version, is not); it is closed
// when the test ends.
func Open(t testing.TB, cfg database.Config, name string) (*gorm.DB, *Counter) {
	t.Helper()
	n := &Counter{}
	cfg.DriverName = testenv.UniqueName(t, "sqlcount")
	if err := sqlhook.Register(cfg.DriverName, (*hooks)(n)); err != nil {
		t.Fatalf("sqlcount: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := database.Open(ctx, cfg, name, testenv.Logger(t))
	if err != nil {
		t.Fatalf("sqlcount: %v", err)
	}
	t.Cleanup(func() { _ = database.Close(db) })
	n.mu.Lock()
	n.c = Counts{}
	n.mu.Unlock()
	return db, n
}

// Of opens a counted pool (see Open) on the database db is connected to,
// with the pool sizes of the tests' configuration: hand it to the code
// under test and keep db for the test's own statements, which are not
// counted.
func Of(t testing.TB, db *gorm.DB) (*gorm.DB, *Counter) {
	t.Helper()
	d, ok := db.Dialector.(*gormmysql.Dialector)
	if !ok || d.Config == nil {
		t.Fatalf("sqlcount: %T is not a MySQL handle", db.Dialector)
	}
	mc, err := mysql.ParseDSN(d.DSN)
	if err != nil {
		t.Fatalf("sqlcount: the handle's DSN: %v", err)
	}
	cfg := testenv.Config(t).MySQL
	cfg.Addr, cfg.User, cfg.Password = mc.Addr, mc.User, mc.Passwd
	return Open(t, cfg, mc.DBName)
}
