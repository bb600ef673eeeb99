// Package fault injects the lost-COMMIT-acknowledgement failure of incident 1
// into a database/sql connection pool, deterministically, for tests and the
// lab.
//
// The failure it reproduces: the application sends COMMIT, the server commits
// and answers OK, and the answer never arrives because the connection breaks.
// The application sees an error although its transaction is durable. Code that
// treats that error as "nothing happened" and retries the work (a local
// message left pending, say) applies the effect twice.
//
// An Injector wraps the go-sql-driver/mysql driver with the hooks of
// pkg/database/sqlhook. Register it under a name and open the database with
// that driver name (database.Config.DriverName, or
// gormmysql.Config.DriverName):
//
//	inj, err := fault.Register("mysql-fault-coupon")
//	cfg.DriverName = "mysql-fault-coupon"
//	db, err := database.Open(ctx, cfg, "oncemall_coupon", log)
//	inj.LoseCommitAcks(1) // the next COMMIT is applied, and reported failed
//	inj.LoseCommitAcksMatching(1, "INTO coupon_deduction") // only that transaction's
//
// While unarmed the wrapper only forwards calls. Armed, a transaction's Commit
// first runs the real COMMIT on the server; only when that succeeded does it
// close the connection and return an error built on mysql.ErrInvalidConn,
// which is what the driver itself returns when the reply to COMMIT is cut off.
// The closed connection is reported invalid, so database/sql discards it
// instead of returning it to the pool. The error is deliberately not
// driver.ErrBadConn: that value tells database/sql the statement never reached
// the server, which is the opposite of the truth here.
//
// Only Commit through the driver's transaction (sql.Tx.Commit, which gorm's
// Commit and Transaction end in) is affected; a COMMIT sent as plain SQL text
// is not recognised. The TCP proxy in pkg/lab/faultproxy covers that case, and any
// client, at the protocol level.
package fault

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"

	"github.com/oncemall/oncemall/pkg/database/sqlhook"
)

// ErrCommitAckLost marks an error injected by an Injector: the transaction
// was committed on the server, and its acknowledgement was thrown away.
// Application code must not test for it (it cannot, in production); tests use
// it to tell the injected failure from a real one.
var ErrCommitAckLost = errors.New("fault: COMMIT acknowledgement lost after the server committed")

// commitAckLostError is what an armed Commit returns. It matches both
// ErrCommitAckLost and mysql.ErrInvalidConn with errors.Is, and reads like
// the driver's own message.
type commitAckLostError struct{}

func (commitAckLostError) Error() string {
	return fmt.Sprintf("%v (%v)", mysql.ErrInvalidConn, ErrCommitAckLost)
}

func (commitAckLostError) Unwrap() []error {
	return []error{mysql.ErrInvalidConn, ErrCommitAckLost}
}

// Stats counts what an Injector saw and did.
type Stats struct {
	// Commits is the number of Commit calls that reached the server and
	// succeeded there, including those whose acknowledgement was dropped
	// (a statement outside a transaction counts once its reply is dropped).
	Commits int64 `json:"commits"`
	// CommitAcksLost is the number of committed transactions reported to the
	// caller as failed.
	CommitAcksLost int64 `json:"commit_acks_lost"`
	// CommitErrors is the number of Commit calls the server itself refused.
	CommitErrors int64 `json:"commit_errors"`
	// Armed is the number of upcoming commits whose acknowledgement will be
	// lost.
	Armed int64 `json:"armed"`
	// Match is the statement text an armed failure waits for ("" for any
	// commit).
	Match string `json:"match,omitempty"`
}

// Injector decides which commits lose their acknowledgement. It is safe for
// concurrent use: arming from one goroutine while others commit is the
// intended use.
type Injector struct {
	mu    sync.Mutex
	armed int64
	match string

	commits      atomic.Int64
	acksLost     atomic.Int64
	commitErrors atomic.Int64
}

// New returns an unarmed Injector. Use Driver or Connector to put it in front
// of a pool, or Register to do both under a driver name.
func New() *Injector {
	return &Injector{}
}

// Register returns a new Injector registered with database/sql under name, so
// sql.Open(name, dsn) and gorm's mysql dialector with DriverName: name open
// pools that go through it. The DSN is go-sql-driver/mysql's. Names are
// process-wide and cannot be unregistered: tests use a unique name each.
func Register(name string) (*Injector, error) {
	inj := New()
	if err := sqlhook.Register(name, hooks{inj}); err != nil {
		return nil, fmt.Errorf("fault: %w", err)
	}
	return inj, nil
}

// LoseCommitAcks arms the injector: the next n successful commits through it
// are reported failed after the server applied them. It replaces any earlier
// arming; n <= 0 disarms.
func (i *Injector) LoseCommitAcks(n int) {
	i.LoseCommitAcksMatching(n, "")
}

// LoseCommitAcksMatching is LoseCommitAcks restricted to transactions that
// ran a statement whose SQL text contains substr (case-sensitive), such as a
// table name: other commits pass untouched and do not use up the arming. It
// keeps a test or lab deterministic when background work (an outbox relay, a
// cron job) commits through the same pool. Only the first 1024 statements of
// a transaction are looked at. A statement sent outside a transaction
// (Exec on the pool) commits by itself and qualifies too: it is applied,
// and its reply, the only acknowledgement it has, is lost.
func (i *Injector) LoseCommitAcksMatching(n int, substr string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.armed = max(int64(n), 0)
	i.match = substr
	if i.armed == 0 {
		i.match = ""
	}
}

// Disarm cancels any armed failures; commits already in flight are not
// affected once they took their turn.
func (i *Injector) Disarm() {
	i.LoseCommitAcks(0)
}

// Stats returns the counters.
func (i *Injector) Stats() Stats {
	i.mu.Lock()
	armed, match := i.armed, i.match
	i.mu.Unlock()
	return Stats{
		Commits:        i.commits.Load(),
		CommitAcksLost: i.acksLost.Load(),
		CommitErrors:   i.commitErrors.Load(),
		Armed:          armed,
		Match:          match,
	}
}

// takeTurn consumes one armed failure, if any is left and the transaction,
// which ran stmts, qualifies.
func (i *Injector) takeTurn(stmts []string) bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.armed <= 0 {
		return false
	}
	if i.match != "" && !slices.ContainsFunc(stmts, func(q string) bool { return strings.Contains(q, i.match) }) {
		return false
	}
	i.armed--
	if i.armed == 0 {
		i.match = ""
	}
	return true
}

// takeAutocommitTurn is takeTurn for a statement that committed by itself:
// it qualifies only for an arming that names a match its text contains. An
// arming without one is for the next COMMIT of a transaction; the writes a
// pool makes on its own (a relay marking rows sent) must not use it up.
func (i *Injector) takeAutocommitTurn(query string) bool {
	i.mu.Lock()
	match := i.match
	i.mu.Unlock()
	return match != "" && i.takeTurn([]string{query})
}

// hooks puts an injector in front of each connection (sqlhook.Hooks).
type hooks struct{ inj *Injector }

func (h hooks) NewConn(closeConn func() error) sqlhook.ConnHooks {
	return &conn{inj: h.inj, closeConn: closeConn}
}

// Driver returns a database/sql driver that opens go-sql-driver/mysql
// connections through the injector.
func (i *Injector) Driver() driver.Driver {
	return sqlhook.Driver(hooks{i})
}

// Connector returns a connector for dsn, for sql.OpenDB.
func (i *Injector) Connector(dsn string) (driver.Connector, error) {
	return sqlhook.Connector(hooks{i}, dsn)
}
