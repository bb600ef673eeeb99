package fault

import (
	"context"
	"database/sql/driver"
	"sync/atomic"
)

// baseConn is the set of optional database/sql interfaces a go-sql-driver/mysql
// connection implements. The wrapper forwards every one of them, so
// database/sql takes the same paths (context cancellation, the driver's own
// value conversion, session reset, validation) with or without the injector.
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

// conn forwards to the driver's connection and wraps the transactions it
// begins.
type conn struct {
	inj  *Injector
	base baseConn
	// broken is set once a commit's acknowledgement was dropped; the
	// connection then behaves like one whose socket died.
	broken atomic.Bool
	// stmts holds the SQL texts run in the open transaction, for
	// LoseCommitAcksMatching. database/sql uses a connection from one
	// goroutine at a time, so it needs no lock.
	stmts []string
	inTx  bool
}

// maxTxStmts bounds the statements remembered per transaction.
const maxTxStmts = 1024

func (c *conn) record(query string) {
	if c.inTx && len(c.stmts) < maxTxStmts {
		c.stmts = append(c.stmts, query)
	}
}

var _ baseConn = (*conn)(nil)

func (c *conn) Prepare(query string) (driver.Stmt, error) {
	if c.broken.Load() {
		return nil, driver.ErrBadConn
	}
	c.record(query)
	return c.base.Prepare(query)
}

func (c *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if c.broken.Load() {
		return nil, driver.ErrBadConn
	}
	c.record(query)
	return c.base.PrepareContext(ctx, query)
}

func (c *conn) Close() error { return c.base.Close() }

// Begin is the pre-context entry point; database/sql only uses it when
// BeginTx is missing, but it is kept for completeness.
func (c *conn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if c.broken.Load() {
		return nil, driver.ErrBadConn
	}
	t, err := c.base.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	c.inTx, c.stmts = true, c.stmts[:0]
	return &tx{conn: c, base: t}, nil
}

func (c *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if c.broken.Load() {
		return nil, driver.ErrBadConn
	}
	c.record(query)
	res, err := c.base.ExecContext(ctx, query, args)
	if err != nil || c.inTx {
		return res, err
	}
	// Outside a transaction the statement committed by itself, and its
	// reply is its acknowledgement.
	inj := c.inj
	if !inj.takeAutocommitTurn(query) {
		return res, nil
	}
	inj.commits.Add(1)
	inj.acksLost.Add(1)
	c.broken.Store(true)
	_ = c.base.Close()
	return nil, commitAckLostError{}
}

func (c *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if c.broken.Load() {
		return nil, driver.ErrBadConn
	}
	c.record(query)
	return c.base.QueryContext(ctx, query, args)
}

func (c *conn) Ping(ctx context.Context) error {
	if c.broken.Load() {
		return driver.ErrBadConn
	}
	return c.base.Ping(ctx)
}

func (c *conn) ResetSession(ctx context.Context) error {
	if c.broken.Load() {
		return driver.ErrBadConn
	}
	return c.base.ResetSession(ctx)
}

// IsValid reports false after a dropped acknowledgement, which makes
// database/sql close the connection instead of pooling it.
func (c *conn) IsValid() bool {
	return !c.broken.Load() && c.base.IsValid()
}

func (c *conn) CheckNamedValue(nv *driver.NamedValue) error {
	return c.base.CheckNamedValue(nv)
}

// tx is where the fault happens.
type tx struct {
	conn *conn
	base driver.Tx
}

// Commit runs the real COMMIT. When the server accepted it and the injector
// is armed, the connection is closed and the caller gets the error the driver
// gives for a connection lost while waiting for a reply. A COMMIT the server
// refused is returned as is and does not use up an armed failure: an
// acknowledgement can only be lost for a transaction that committed.
func (t *tx) Commit() error {
	inj := t.conn.inj
	stmts := t.conn.stmts
	t.conn.inTx = false
	if err := t.base.Commit(); err != nil {
		inj.commitErrors.Add(1)
		return err
	}
	inj.commits.Add(1)
	if !inj.takeTurn(stmts) {
		return nil
	}
	inj.acksLost.Add(1)
	t.conn.broken.Store(true)
	// Closing the socket now, as the driver does when a read fails, makes the
	// server see the client go away, exactly as after a real network cut.
	_ = t.conn.base.Close()
	return commitAckLostError{}
}

func (t *tx) Rollback() error {
	t.conn.inTx = false
	return t.base.Rollback()
}
