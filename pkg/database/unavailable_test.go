package database_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// cutPool is a pool on a throwaway database reached through a forwarder
// the test can cut, so that only this pool loses the shared server.
type cutPool struct {
	fwd  *testenv.Forwarder
	db   *gorm.DB
	pool *sql.DB
	// direct reaches the same server without the forwarder.
	direct *gorm.DB
}

func newCutPool(t *testing.T) *cutPool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	direct := testenv.DB(t)
	var name string
	testenv.Must(t, direct.Raw("SELECT DATABASE()").Scan(&name).Error)
	cfg := testenv.Config(t).MySQL
	fwd := testenv.NewForwarder(t, cfg.Addr)
	cfg.Addr = fwd.Addr()
	db, err := database.Open(ctx, cfg, name, testenv.Logger(t))
	testenv.Must(t, err)
	t.Cleanup(func() { _ = database.Close(db) })
	pool, err := db.DB()
	testenv.Must(t, err)
	return &cutPool{fwd: fwd, db: db, pool: pool, direct: direct}
}

// running waits until a statement containing text runs on the server.
func (p *cutPool) running(t *testing.T, text string) int64 {
	t.Helper()
	var id int64
	testenv.WaitFor(t, 10*time.Second, "the statement to run on the server", func() bool {
		err := p.direct.Raw("SELECT id FROM information_schema.processlist WHERE info LIKE ? AND id <> CONNECTION_ID() LIMIT 1", "%"+text+"%").Row().Scan(&id)
		return err == nil
	})
	return id
}

// TestIsUnavailable feeds IsUnavailable the errors a real server and a real
// cut produce (a forwarder in front of the shared server, cut while the
// pool is idle, in a transaction, mid-statement; the server killing the
// connection; a server that stops answering), beside the server's refusals
// of a statement and the driver's sentinels.
func TestIsUnavailable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := newCutPool(t)
	testenv.Must(t, p.direct.Exec("CREATE TABLE u (k INT PRIMARY KEY)").Error)
	testenv.Must(t, p.direct.Exec("INSERT INTO u VALUES (1)").Error)

	// Cut while idle: the pooled connections are dead and new ones refused.
	p.fwd.Close()
	refused := p.pool.PingContext(ctx)
	p.fwd.Reopen()

	// Cut inside a transaction: the statement cannot move to another
	// connection.
	tx, err := p.pool.BeginTx(ctx, nil)
	testenv.Must(t, err)
	_, err = tx.ExecContext(ctx, "UPDATE u SET k = k WHERE k = 1")
	testenv.Must(t, err)
	p.fwd.Close()
	_, inTx := tx.ExecContext(ctx, "UPDATE u SET k = k WHERE k = 1")
	commitCut := tx.Commit()
	p.fwd.Reopen()

	// Cut while a statement runs.
	midStatement := make(chan error, 1)
	go func() {
		_, err := p.pool.ExecContext(ctx, "SELECT SLEEP(5) /* cut-mid-statement */")
		midStatement <- err
	}()
	p.running(t, "cut-mid-statement")
	p.fwd.Close()
	cutMid := <-midStatement
	p.fwd.Reopen()

	// The server kills the connection while a statement runs.
	killed := make(chan error, 1)
	go func() {
		_, err := p.pool.ExecContext(ctx, "SELECT SLEEP(5) /* killed-by-server */")
		killed <- err
	}()
	testenv.Must(t, p.direct.Exec("KILL CONNECTION ?", p.running(t, "killed-by-server")).Error)
	killedErr := <-killed

	// MySQL hangs: the pool's deadline ends the wait for an answer.
	p.fwd.Stall()
	hctx, hcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	hangs := p.pool.PingContext(hctx)
	hcancel()
	p.fwd.Resume()

	// The server refuses statements: none of these is unavailability.
	exec := func(q string) error {
		_, err := p.pool.ExecContext(ctx, q)
		return err
	}
	lockTx, err := p.direct.DB()
	testenv.Must(t, err)
	holder, err := lockTx.BeginTx(ctx, nil)
	testenv.Must(t, err)
	defer holder.Rollback()
	_, err = holder.ExecContext(ctx, "UPDATE u SET k = k WHERE k = 1")
	testenv.Must(t, err)
	waiter, err := p.pool.Conn(ctx)
	testenv.Must(t, err)
	_, err = waiter.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 1")
	testenv.Must(t, err)
	_, lockWait := waiter.ExecContext(ctx, "UPDATE u SET k = k WHERE k = 1")
	waiter.Close()
	holder.Rollback()
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()

	for _, tc := range []struct {
		what        string
		err         error
		unavailable bool
	}{
		{"connection refused", refused, true},
		{"cut inside a transaction", inTx, true},
		{"commit on a cut connection", commitCut, true},
		{"cut mid-statement", cutMid, true},
		{"connection killed by the server", killedErr, true},
		{"wrapped twice", fmt.Errorf("deduct: %w", fmt.Errorf("store: %w", refused)), true},
		{"driver.ErrBadConn", driver.ErrBadConn, true},
		{"mysql.ErrInvalidConn", mysql.ErrInvalidConn, true},
		{"server gone (2006)", &mysql.MySQLError{Number: 2006}, true},
		{"lost during query (2013)", &mysql.MySQLError{Number: 2013}, true},
		{"too many connections (1040)", &mysql.MySQLError{Number: 1040}, true},
		{"server shutdown (1053)", &mysql.MySQLError{Number: 1053}, true},

		{"deadline while MySQL hangs (ambiguous: a ping decides)", hangs, false},
		{"duplicate key", exec("INSERT INTO u VALUES (1)"), false},
		{"lock wait timeout", lockWait, false},
		{"deadlock", &mysql.MySQLError{Number: 1213}, false},
		{"syntax", exec("SELEC 1"), false},
		{"missing table", exec("SELECT * FROM no_such_table"), false},
		{"query killed (1317)", &mysql.MySQLError{Number: 1317}, false},
		{"no rows", sql.ErrNoRows, false},
		{"context canceled", p.pool.PingContext(cctx), false},
		{"a handler's refusal", errors.New("coupon already used"), false},
		{"nil", nil, false},
	} {
		t.Logf("%s: %T %v", tc.what, tc.err, tc.err)
		if tc.err == nil && tc.what != "nil" {
			t.Errorf("%s: no error at all", tc.what)
			continue
		}
		if got := database.IsUnavailable(tc.err); got != tc.unavailable {
			t.Errorf("%s: IsUnavailable(%T %v) = %v, want %v", tc.what, tc.err, tc.err, got, tc.unavailable)
		}
	}
}
