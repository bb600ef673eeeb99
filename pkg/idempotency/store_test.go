package idempotency_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/testenv"
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
