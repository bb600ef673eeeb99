package fault_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/lab/fault"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// openFaultDB returns a gorm handle on a fresh database whose connections go
// through a newly registered Injector, with a table t(id, v).
func openFaultDB(t *testing.T) (*gorm.DB, *fault.Injector) {
	t.Helper()
	cfg, name := testenv.NewDatabase(t)
	driverName := testenv.UniqueName(t, "fault")
	inj, err := fault.Register(driverName)
	testenv.Must(t, err)
	cfg.DriverName = driverName
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := database.Open(ctx, cfg, name, testenv.Logger(t))
	testenv.Must(t, err)
	t.Cleanup(func() { _ = database.Close(db) })
	testenv.Must(t, db.Exec("CREATE TABLE t (id BIGINT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(64) NOT NULL)").Error)
	return db, inj
}

func countRows(t *testing.T, db *gorm.DB, where string, args ...any) int64 {
	t.Helper()
	var n int64
	q := db.Table("t")
	if where != "" {
		q = q.Where(where, args...)
	}
	testenv.Must(t, q.Count(&n).Error)
	return n
}

func insert(db *gorm.DB, v string) error {
	return db.Transaction(func(tx *gorm.DB) error {
		return tx.Exec("INSERT INTO t (v) VALUES (?)", v).Error
	})
}

func TestArmedCommitIsAppliedButReportedFailed(t *testing.T) {
	db, inj := openFaultDB(t)

	inj.LoseCommitAcks(1)
	err := insert(db, "lost-ack")
	if err == nil {
		t.Fatal("commit with an armed injector returned no error")
	}
	if !errors.Is(err, mysql.ErrInvalidConn) || !errors.Is(err, fault.ErrCommitAckLost) {
		t.Fatalf("commit error = %v, want one matching mysql.ErrInvalidConn and fault.ErrCommitAckLost", err)
	}
	if errors.Is(err, sql.ErrTxDone) {
		t.Fatalf("commit error = %v: the commit never reached the driver", err)
	}
	if n := countRows(t, db, "v = ?", "lost-ack"); n != 1 {
		t.Fatalf("rows after the lost acknowledgement = %d, want 1: the server must have committed", n)
	}

	// The next commit is a normal one.
	testenv.Must(t, insert(db, "normal"))
	if n := countRows(t, db, ""); n != 2 {
		t.Fatalf("rows = %d, want 2", n)
	}
	want := fault.Stats{Commits: 2, CommitAcksLost: 1, Armed: 0}
	if got := inj.Stats(); got != want {
		t.Fatalf("stats = %+v, want %+v", got, want)
	}
}

func TestGormBeginCommitReachesTheInjector(t *testing.T) {
	db, inj := openFaultDB(t)

	inj.LoseCommitAcks(2)
	for i := range 3 {
		tx := db.Begin()
		testenv.Must(t, tx.Error)
		testenv.Must(t, tx.Exec("INSERT INTO t (v) VALUES (?)", "begin-commit").Error)
		err := tx.Commit().Error
		if i < 2 && !errors.Is(err, fault.ErrCommitAckLost) {
			t.Fatalf("commit %d: error = %v, want the injected one", i, err)
		}
		if i == 2 && err != nil {
			t.Fatalf("commit %d after two armed failures: %v", i, err)
		}
	}
	if n := countRows(t, db, "v = ?", "begin-commit"); n != 3 {
		t.Fatalf("rows = %d, want 3: every commit reached the server", n)
	}
	if got := inj.Stats().CommitAcksLost; got != 2 {
		t.Fatalf("acks lost = %d, want 2", got)
	}
}

func TestBrokenConnectionLeavesThePool(t *testing.T) {
	db, inj := openFaultDB(t)
	sqlDB, err := db.DB()
	testenv.Must(t, err)
	// One connection only: if the broken one were pooled again, the next
	// statement would fail or run on the same server thread.
	sqlDB.SetMaxOpenConns(1)
	sqlDB.SetMaxIdleConns(1)

	var before, after int64
	testenv.Must(t, db.Raw("SELECT CONNECTION_ID()").Scan(&before).Error)
	inj.LoseCommitAcks(1)
	if err := insert(db, "x"); !errors.Is(err, fault.ErrCommitAckLost) {
		t.Fatalf("commit error = %v, want the injected one", err)
	}
	testenv.Must(t, db.Raw("SELECT CONNECTION_ID()").Scan(&after).Error)
	if before == after {
		t.Fatalf("connection %d was reused after its acknowledgement was lost", before)
	}
}

func TestRollbackAndUnarmedCommitsKeepTheArming(t *testing.T) {
	db, inj := openFaultDB(t)

	testenv.Must(t, insert(db, "before-arming"))
	inj.LoseCommitAcks(1)
	rollback := errors.New("roll back")
	if err := db.Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec("INSERT INTO t (v) VALUES ('rolled-back')").Error; err != nil {
			return err
		}
		return rollback
	}); !errors.Is(err, rollback) {
		t.Fatalf("transaction error = %v, want the rollback cause", err)
	}
	if got := inj.Stats().Armed; got != 1 {
		t.Fatalf("armed after a rollback = %d, want 1: only commits use up an arming", got)
	}
	inj.Disarm()
	testenv.Must(t, insert(db, "after-disarm"))
	if n := countRows(t, db, ""); n != 2 {
		t.Fatalf("rows = %d, want 2", n)
	}
}

// TestArmingWhileOthersCommit races committers against a goroutine that arms
// one failure at a time. Every failure a committer sees must be an injected
// one, there must be exactly as many as were armed, and every transaction,
// failed or not, must be in the table.
func TestArmingWhileOthersCommit(t *testing.T) {
	db, inj := openFaultDB(t)
	const (
		workers = 32
		arms    = 10
	)

	var (
		stop     atomic.Bool
		attempts atomic.Int64
		failed   atomic.Int64
		wg       sync.WaitGroup
		errsMu   sync.Mutex
		errs     []error
	)
	for range workers {
		wg.Go(func() {
			for !stop.Load() {
				attempts.Add(1)
				if err := insert(db, "race"); err != nil {
					if errors.Is(err, fault.ErrCommitAckLost) {
						failed.Add(1)
						continue
					}
					errsMu.Lock()
					errs = append(errs, err)
					errsMu.Unlock()
					return
				}
			}
		})
	}
	deadline := time.Now().Add(30 * time.Second)
	for range arms {
		inj.LoseCommitAcks(1)
		for inj.Stats().Armed != 0 {
			if time.Now().After(deadline) {
				stop.Store(true)
				wg.Wait()
				t.Fatalf("armed failure not consumed in time; stats %+v, errors %v", inj.Stats(), errs)
			}
			time.Sleep(time.Millisecond)
		}
	}
	stop.Store(true)
	wg.Wait()

	if len(errs) > 0 {
		t.Fatalf("unexpected errors: %v", errs)
	}
	if got := failed.Load(); got != arms {
		t.Fatalf("injected failures seen = %d, want %d", got, arms)
	}
	st := inj.Stats()
	if st.CommitAcksLost != arms || st.Commits != attempts.Load() {
		t.Fatalf("stats = %+v, want %d acks lost and %d commits", st, arms, attempts.Load())
	}
	if n := countRows(t, db, ""); n != attempts.Load() {
		t.Fatalf("rows = %d, want %d: every transaction, failed or not, committed", n, attempts.Load())
	}
}

func TestPreparedStatementsAndPlainQueriesPassThrough(t *testing.T) {
	db, _ := openFaultDB(t)
	sqlDB, err := db.DB()
	testenv.Must(t, err)

	stmt, err := sqlDB.Prepare("INSERT INTO t (v) VALUES (?)")
	testenv.Must(t, err)
	defer stmt.Close()
	for _, v := range []string{"a", "b", "c"} {
		_, err := stmt.Exec(v)
		testenv.Must(t, err)
	}
	var got string
	testenv.Must(t, sqlDB.QueryRow("SELECT GROUP_CONCAT(v ORDER BY id) FROM t WHERE id > ?", 0).Scan(&got))
	if got != "a,b,c" {
		t.Fatalf("values = %q, want a,b,c", got)
	}
	// The driver's own value conversion must still apply (uint64 above
	// MaxInt64 is refused by database/sql's default converter).
	var big uint64
	testenv.Must(t, sqlDB.QueryRow("SELECT ?", uint64(1<<63+5)).Scan(&big))
	if big != 1<<63+5 {
		t.Fatalf("uint64 round trip = %d", big)
	}
}

func TestRegisterRefusesADuplicateName(t *testing.T) {
	name := testenv.UniqueName(t, "fault")
	_, err := fault.Register(name)
	testenv.Must(t, err)
	if _, err := fault.Register(name); err == nil {
		t.Fatal("second Register with the same name succeeded")
	}
	if _, err := fault.Register("mysql"); err == nil {
		t.Fatal("Register over the mysql driver succeeded")
	}
}

func TestMatchingArmingWaitsForItsTransaction(t *testing.T) {
	db, inj := openFaultDB(t)
	testenv.Must(t, db.Exec("CREATE TABLE deduction (id BIGINT AUTO_INCREMENT PRIMARY KEY, order_no VARCHAR(32) NOT NULL)").Error)
	deduct := func(orderNo string) error {
		return db.Transaction(func(tx *gorm.DB) error {
			return tx.Exec("INSERT INTO deduction (order_no) VALUES (?)", orderNo).Error
		})
	}

	inj.LoseCommitAcksMatching(1, "INTO deduction")
	// Unrelated commits, as a relay or a cron job would make, pass and leave
	// the arming in place.
	for range 3 {
		testenv.Must(t, insert(db, "background"))
	}
	if st := inj.Stats(); st.Armed != 1 || st.Match != "INTO deduction" {
		t.Fatalf("stats after unrelated commits = %+v, want still armed for the match", st)
	}
	if err := deduct("o-1"); !errors.Is(err, fault.ErrCommitAckLost) {
		t.Fatalf("matching commit: err = %v, want the injected one", err)
	}
	testenv.Must(t, deduct("o-2"))
	var n int64
	testenv.Must(t, db.Table("deduction").Count(&n).Error)
	if n != 2 {
		t.Fatalf("deductions = %d, want 2: the failed one committed", n)
	}
	if st := inj.Stats(); st.CommitAcksLost != 1 || st.Armed != 0 || st.Match != "" {
		t.Fatalf("stats = %+v, want 1 lost, disarmed", st)
	}
}

// TestAStatementOutsideATransactionLosesItsReply: a write sent on the pool
// commits by itself, so its reply is its acknowledgement. A matching arming
// applies it and drops the reply; an arming without a match leaves such
// statements alone (it waits for a transaction's COMMIT).
func TestAStatementOutsideATransactionLosesItsReply(t *testing.T) {
	db, inj := openFaultDB(t)
	testenv.Must(t, db.Exec("CREATE TABLE lock_row (id BIGINT PRIMARY KEY, holder VARCHAR(32))").Error)
	testenv.Must(t, db.Exec("INSERT INTO lock_row (id) VALUES (1), (2)").Error)

	inj.LoseCommitAcks(1)
	testenv.Must(t, db.Exec("UPDATE lock_row SET holder = 'a' WHERE id = 2").Error)
	if st := inj.Stats(); st.Armed != 1 || st.CommitAcksLost != 0 {
		t.Fatalf("an unrestricted arming after a statement on the pool: %+v, want it untouched", st)
	}

	inj.LoseCommitAcksMatching(1, "UPDATE lock_row")
	err := db.Exec("UPDATE lock_row SET holder = 'o-1' WHERE id = 1 AND holder IS NULL").Error
	if !errors.Is(err, fault.ErrCommitAckLost) {
		t.Fatalf("matching statement: err = %v, want the injected one", err)
	}
	var holder string
	testenv.Must(t, db.Raw("SELECT holder FROM lock_row WHERE id = 1").Scan(&holder).Error)
	if holder != "o-1" {
		t.Fatalf("holder = %q, want o-1: the statement was applied though its reply was lost", holder)
	}
	if st := inj.Stats(); st.CommitAcksLost != 1 || st.Armed != 0 {
		t.Fatalf("stats = %+v, want 1 lost, disarmed", st)
	}
}
