package idempotency_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// TestTakeOverIsConditional lines 30 claims up after they all read the same
// stale row, then lets them update at once: the conditional update must let
// exactly one through. An unconditional one would hand the key to all 30.
func TestTakeOverIsConditional(t *testing.T) {
	for name, age := range map[string]func(a *testApp){
		"lock ran out": func(a *testApp) {
			testenv.Must(t, a.db.Exec("UPDATE idempotency_record SET locked_until = ?", time.Now().UTC().Add(-time.Second)).Error)
		},
		"retention ran out": func(a *testApp) {
			testenv.Must(t, a.db.Exec("UPDATE idempotency_record SET status = 'SUCCEEDED', response_status = 201, expire_time = ?",
				time.Now().UTC().Add(-time.Second)).Error)
		},
	} {
		t.Run(name, func(t *testing.T) {
			app := newTestApp(t)
			store := app.mw.Store()
			cfg := idempotency.DefaultConfig()
			ctx := context.Background()
			const scope, key, fp = "u1 POST /orders", "stale-key-1", "fp"
			first, err := store.Claim(ctx, scope, key, fp, cfg.LockTTL, cfg.Retention, false)
			testenv.Must(t, err)
			if first.Outcome != idempotency.Claimed {
				t.Fatalf("seed: %v", first.Outcome)
			}
			age(app)

			const n = 30
			var arrived atomic.Int32
			lineUp := make(chan struct{})
			store.SetAfterReadHook(func() {
				if arrived.Add(1) == n {
					close(lineUp)
				}
				select {
				case <-lineUp:
				case <-time.After(5 * time.Second):
				}
			})
			var claimed atomic.Int32
			var wg sync.WaitGroup
			for range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res, err := store.Claim(ctx, scope, key, fp, cfg.LockTTL, cfg.Retention, true)
					if err != nil {
						t.Error(err)
						return
					}
					if res.Outcome == idempotency.Claimed {
						claimed.Add(1)
					}
				}()
			}
			wg.Wait()
			if arrived.Load() < n {
				t.Fatalf("only %d claims reached the read", arrived.Load())
			}
			if claimed.Load() != 1 {
				t.Fatalf("%d claims took the stale key over, want 1", claimed.Load())
			}
			// The old holder has lost it for good.
			if err := store.Complete(ctx, nil, first.Claim, idempotency.Response{Status: 201}, cfg.Retention); err != idempotency.ErrClaimLost {
				t.Fatalf("old holder completed: %v", err)
			}
		})
	}
}

// TestClaimCompletedAnswersADeadlockVictimInProgress: InnoDB may pick a
// transaction waiting at the record insert as a deadlock victim (concurrent
// inserts of one key right after its stale record was deleted now and then
// wait on each other's gap locks). The victim must get InProgress, which the
// middleware answers 409, not an error, which it would answer 500; marked
// Deadlocked, so the middleware also drops the request's Redis marker (the
// other side of the deadlock may hold no claim on the key at all). The
// deadlock is made on purpose: A locks a row, B inserts the key, A inserts
// the key and waits on B's row, B asks for A's row. A, which has written
// least, is the victim InnoDB rolls back.
func TestClaimCompletedAnswersADeadlockVictimInProgress(t *testing.T) {
	app := newTestApp(t)
	store := app.mw.Store()
	ctx := context.Background()
	const scope, key, fp = "u1 POST /orders", "deadlock-key-1", "fp"
	resp := idempotency.Response{Status: 201, Body: []byte(`{}`)}
	testenv.Must(t, app.db.Exec("CREATE TABLE deadlock_probe (id INT PRIMARY KEY)").Error)
	testenv.Must(t, app.db.Exec("INSERT INTO deadlock_probe VALUES (1)").Error)
	testenv.Must(t, app.db.Exec("CREATE TABLE deadlock_ballast (id INT PRIMARY KEY)").Error)

	a, b := app.db.Begin(), app.db.Begin()
	defer a.Rollback()
	defer b.Rollback()
	var connA int64
	testenv.Must(t, a.Raw("SELECT CONNECTION_ID()").Scan(&connA).Error)
	testenv.Must(t, a.Exec("SELECT id FROM deadlock_probe WHERE id = 1 FOR UPDATE").Error)
	// InnoDB rolls back the transaction that has written least: B writes
	// some ballast so that A, which has written nothing, is the one.
	testenv.Must(t, b.Exec("INSERT INTO deadlock_ballast VALUES (1), (2), (3), (4), (5), (6), (7), (8), (9), (10)").Error)
	first, err := store.ClaimCompleted(ctx, b, scope, key, fp, resp, time.Hour)
	testenv.Must(t, err)
	if first.Outcome != idempotency.Claimed {
		t.Fatalf("B's insert: %v, want Claimed", first.Outcome)
	}

	type result struct {
		res idempotency.ClaimResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := store.ClaimCompleted(ctx, a, scope, key, fp, resp, time.Hour)
		done <- result{res, err}
	}()
	// InnoDB refreshes information_schema.innodb_trx only when it has not
	// been read for 0.1 s, so the poll waits longer than that between reads.
	giveUp := time.After(10 * time.Second)
	for waiting := int64(0); waiting != 1; {
		select {
		case <-time.After(150 * time.Millisecond):
		case <-giveUp:
			t.Fatal("A's insert never waited for B's row")
		case got := <-done:
			t.Fatalf("A's insert did not wait for B's row: %v, %v", got.res.Outcome, got.err)
		}
		testenv.Must(t, app.db.Raw("SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_mysql_thread_id = ? AND trx_state = 'LOCK WAIT'", connA).Scan(&waiting).Error)
	}
	if err := b.Exec("SELECT id FROM deadlock_probe WHERE id = 1 FOR UPDATE").Error; err != nil {
		t.Fatalf("B closing the cycle: %v, want A to be the victim", err)
	}
	got := <-done
	if got.err != nil || got.res.Outcome != idempotency.InProgress || !got.res.Deadlocked {
		t.Fatalf("the deadlock victim got %+v, %v; want InProgress, Deadlocked and no error", got.res, got.err)
	}
}
