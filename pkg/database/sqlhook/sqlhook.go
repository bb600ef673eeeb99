// Package sqlhook puts hooks in front of go-sql-driver/mysql connections:
// they see every statement, transaction begin, commit and rollback a
// database/sql pool sends, and may step into a commit. It is the one driver
// wrapper of the project, under the commit fault injector (pkg/lab/fault)
// and the statement counter of the tests (pkg/testkit/sqlcount).
//
// A wrapped connection forwards every optional database/sql interface the
// driver's connection implements, so database/sql takes the same paths
// (context cancellation, the driver's value conversion and client-side
// interpolation, session reset, validation) with or without the hooks.
//
// Register the wrapper under a driver name and open the pool with it
// (database.Config.DriverName, or gormmysql.Config.DriverName), or build a
// Connector for sql.OpenDB.
package sqlhook

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"
)

// Hooks makes the hooks of each connection a wrapped driver opens.
type Hooks interface {
	// NewConn returns the hooks of a new connection; closeConn closes the
	// driver's connection under it, as a broken socket would. database/sql
	// uses a connection from one goroutine at a time, so the hooks need no
	// lock for state of their own connection.
	NewConn(closeConn func() error) ConnHooks
}

// Kind tells how a statement reaches the server.
type Kind int

const (
	// Exec and Query are statements sent as text (Exec or Query on the
	// connection, the arguments interpolated by the driver): one round
	// trip each.
	Exec Kind = iota
	Query
	// Prepare is a statement being prepared, not yet run.
	Prepare
	// Execute is a run of a prepared statement.
	Execute
)

// ConnHooks sees the calls of one connection.
type ConnHooks interface {
	// Err is asked before each call that would reach the server; a non-nil
	// error is returned instead of making the call, and the connection
	// reports itself invalid so that database/sql discards it.
	// driver.ErrBadConn is the error of a dead connection.
	Err() error
	// Statement is told the text of each statement the server received
	// (a call the driver refused before sending, with driver.ErrSkip or
	// driver.ErrBadConn, is not one), how it was sent, and the driver's
	// answer err. It returns the error the caller gets: err leaves the
	// answer as it is; another error replaces a result the server gave.
	Statement(query string, kind Kind, err error) error
	// Begin is told that a transaction began with opts.
	Begin(opts driver.TxOptions)
	// Commit ends the connection's transaction: it calls commit, the
	// driver's COMMIT, and returns what the caller sees.
	Commit(commit func() error) error
	// Rollback is told that the transaction was rolled back, with the
	// driver's answer.
	Rollback(err error)
}

// Driver returns a database/sql driver that opens go-sql-driver/mysql
// connections with hooks' hooks.
func Driver(hooks Hooks) driver.Driver {
	return &hookedDriver{hooks: hooks}
}

// Connector returns a connector for dsn, a go-sql-driver/mysql DSN, whose
// connections have hooks' hooks: for sql.OpenDB.
func Connector(hooks Hooks, dsn string) (driver.Connector, error) {
	return Driver(hooks).(driver.DriverContext).OpenConnector(dsn)
}

// Register registers Driver(hooks) with database/sql under name. Names are
// process-wide and cannot be unregistered, so tests use a unique name each;
// a name already taken is an error.
func Register(name string, hooks Hooks) (err error) {
	// sql.Register panics on a name already taken; that is a caller's
	// mistake worth an error, not a crash.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("sqlhook: register database/sql driver %q: %v", name, r)
		}
	}()
	sql.Register(name, Driver(hooks))
	return nil
}

type hookedDriver struct {
	hooks Hooks
	base  mysql.MySQLDriver
}

var (
	_ driver.Driver        = (*hookedDriver)(nil)
	_ driver.DriverContext = (*hookedDriver)(nil)
)

func (d *hookedDriver) Open(dsn string) (driver.Conn, error) {
	c, err := d.OpenConnector(dsn)
	if err != nil {
		return nil, err
	}
	return c.Connect(context.Background())
}

func (d *hookedDriver) OpenConnector(dsn string) (driver.Connector, error) {
	base, err := d.base.OpenConnector(dsn)
	if err != nil {
		return nil, err
	}
	return &connector{drv: d, base: base}, nil
}

type connector struct {
	drv  *hookedDriver
	base driver.Connector
}

func (c *connector) Connect(ctx context.Context) (driver.Conn, error) {
	raw, err := c.base.Connect(ctx)
	if err != nil {
		return nil, err
	}
	bc, ok := raw.(baseConn)
	if !ok {
		_ = raw.Close()
		return nil, fmt.Errorf("sqlhook: driver connection %T lacks the interfaces go-sql-driver/mysql provides", raw)
	}
	return &conn{base: bc, hooks: c.drv.hooks.NewConn(bc.Close)}, nil
}

func (c *connector) Driver() driver.Driver { return c.drv }

// baseConn is the set of optional database/sql interfaces a
// go-sql-driver/mysql connection implements; conn forwards each of them.
type baseConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
	driver.NamedValueChecker
}

type conn struct {
	base  baseConn
	hooks ConnHooks
}

var _ baseConn = (*conn)(nil)

// sent reports whether a call that returned err reached the server: the
// driver answers driver.ErrSkip (database/sql then prepares the statement)
// and driver.ErrBadConn (it retries on another connection) before sending.
func sent(err error) bool {
	return !errors.Is(err, driver.ErrSkip) && !errors.Is(err, driver.ErrBadConn)
}

func (c *conn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if err := c.hooks.Err(); err != nil {
		return nil, err
	}
	s, err := c.base.PrepareContext(ctx, query)
	if err = c.answer(query, Prepare, err); err != nil {
		if s != nil {
			_ = s.Close()
		}
		return nil, err
	}
	return &stmt{conn: c, base: s, query: query}, nil
}

func (c *conn) Close() error { return c.base.Close() }

// Begin is the pre-context entry point; database/sql only uses it when
// BeginTx is missing, but it is kept for completeness.
func (c *conn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if err := c.hooks.Err(); err != nil {
		return nil, err
	}
	t, err := c.base.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	c.hooks.Begin(opts)
	return &tx{conn: c, base: t}, nil
}

func (c *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if err := c.hooks.Err(); err != nil {
		return nil, err
	}
	res, err := c.base.ExecContext(ctx, query, args)
	if err = c.answer(query, Exec, err); err != nil {
		return nil, err
	}
	return res, nil
}

func (c *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if err := c.hooks.Err(); err != nil {
		return nil, err
	}
	rows, err := c.base.QueryContext(ctx, query, args)
	if err = c.answer(query, Query, err); err != nil {
		if rows != nil {
			_ = rows.Close()
		}
		return nil, err
	}
	return rows, nil
}

// answer is the error the caller of a statement gets: the driver's err, as
// the hooks may have replaced it once the server received the statement.
func (c *conn) answer(query string, kind Kind, err error) error {
	if !sent(err) {
		return err
	}
	return c.hooks.Statement(query, kind, err)
}

func (c *conn) Ping(ctx context.Context) error {
	if err := c.hooks.Err(); err != nil {
		return err
	}
	return c.base.Ping(ctx)
}

func (c *conn) ResetSession(ctx context.Context) error {
	if err := c.hooks.Err(); err != nil {
		return err
	}
	return c.base.ResetSession(ctx)
}

// IsValid reports false once the hooks report an error, which makes
// database/sql close the connection instead of pooling it.
func (c *conn) IsValid() bool {
	return c.hooks.Err() == nil && c.base.IsValid()
}

func (c *conn) CheckNamedValue(nv *driver.NamedValue) error {
	return c.base.CheckNamedValue(nv)
}

type tx struct {
	conn *conn
	base driver.Tx
}

func (t *tx) Commit() error {
	return t.conn.hooks.Commit(t.base.Commit)
}

func (t *tx) Rollback() error {
	err := t.base.Rollback()
	t.conn.hooks.Rollback(err)
	return err
}

// baseStmt is what a go-sql-driver/mysql prepared statement implements.
type baseStmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
	driver.NamedValueChecker
}

// stmt is a prepared statement of conn; its runs are statements too.
type stmt struct {
	conn  *conn
	base  driver.Stmt
	query string
}

var _ baseStmt = (*stmt)(nil)

func (s *stmt) Close() error  { return s.base.Close() }
func (s *stmt) NumInput() int { return s.base.NumInput() }

// Exec and Query are the pre-context entry points, kept for completeness.
func (s *stmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.ExecContext(context.Background(), named(args))
}

func (s *stmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.QueryContext(context.Background(), named(args))
}

func (s *stmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	if err := s.conn.hooks.Err(); err != nil {
		return nil, err
	}
	bs, ok := s.base.(driver.StmtExecContext)
	if !ok {
		return nil, fmt.Errorf("sqlhook: prepared statement %T lacks ExecContext", s.base)
	}
	res, err := bs.ExecContext(ctx, args)
	if err = s.conn.answer(s.query, Execute, err); err != nil {
		return nil, err
	}
	return res, nil
}

func (s *stmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	if err := s.conn.hooks.Err(); err != nil {
		return nil, err
	}
	bs, ok := s.base.(driver.StmtQueryContext)
	if !ok {
		return nil, fmt.Errorf("sqlhook: prepared statement %T lacks QueryContext", s.base)
	}
	rows, err := bs.QueryContext(ctx, args)
	if err = s.conn.answer(s.query, Execute, err); err != nil {
		if rows != nil {
			_ = rows.Close()
		}
		return nil, err
	}
	return rows, nil
}

// CheckNamedValue converts arguments as the driver's statement does, or
// as its connection does when the statement has no converter of its own.
func (s *stmt) CheckNamedValue(nv *driver.NamedValue) error {
	if c, ok := s.base.(driver.NamedValueChecker); ok {
		return c.CheckNamedValue(nv)
	}
	return s.conn.base.CheckNamedValue(nv)
}

func named(args []driver.Value) []driver.NamedValue {
	nv := make([]driver.NamedValue, len(args))
	for i, v := range args {
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return nv
}
