package fault

import (
	"database/sql/driver"
	"sync/atomic"

	"github.com/oncemall/oncemall/pkg/database/sqlhook"
)

// conn is the injector's view of one connection (see sqlhook.ConnHooks).
type conn struct {
	inj *Injector
	// closeConn closes the driver's connection, as a dead socket would.
	closeConn func() error
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

var _ sqlhook.ConnHooks = (*conn)(nil)

func (c *conn) Err() error {
	if c.broken.Load() {
		return driver.ErrBadConn
	}
	return nil
}

// Statement remembers the statements of a transaction. A statement run
// with Exec outside one committed by itself, and its reply is its
// acknowledgement: an arming that names it applies it, closes the
// connection and reports it failed, as for a COMMIT.
func (c *conn) Statement(query string, kind sqlhook.Kind, err error) error {
	if c.inTx {
		if len(c.stmts) < maxTxStmts {
			c.stmts = append(c.stmts, query)
		}
		return err
	}
	if err != nil || kind != sqlhook.Exec || !c.inj.takeAutocommitTurn(query) {
		return err
	}
	c.inj.commits.Add(1)
	c.inj.acksLost.Add(1)
	c.broken.Store(true)
	_ = c.closeConn()
	return commitAckLostError{}
}

func (c *conn) Begin(driver.TxOptions) {
	c.inTx, c.stmts = true, c.stmts[:0]
}

// Commit is where the fault happens. It runs the real COMMIT. When the
// server accepted it and the injector is armed, the connection is closed
// and the caller gets the error the driver gives for a connection lost
// while waiting for a reply. A COMMIT the server refused is returned as is
// and does not use up an armed failure: an acknowledgement can only be lost
// for a transaction that committed.
func (c *conn) Commit(commit func() error) error {
	inj := c.inj
	stmts := c.stmts
	c.inTx = false
	if err := commit(); err != nil {
		inj.commitErrors.Add(1)
		return err
	}
	inj.commits.Add(1)
	if !inj.takeTurn(stmts) {
		return nil
	}
	inj.acksLost.Add(1)
	c.broken.Store(true)
	// Closing the socket now, as the driver does when a read fails, makes the
	// server see the client go away, exactly as after a real network cut.
	_ = c.closeConn()
	return commitAckLostError{}
}

func (c *conn) Rollback(error) {
	c.inTx = false
}
