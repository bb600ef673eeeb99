package idempotency_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/redislock"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// seedRecords writes completed records created at the given time.
func seedRecords(t *testing.T, store *idempotency.Store, at time.Time, keys ...string) {
	t.Helper()
	store.SetClock(func() time.Time { return at })
	defer store.SetClock(func() time.Time { return time.Now().UTC() })
	cfg := idempotency.DefaultConfig()
	for _, k := range keys {
		res, err := store.Claim(context.Background(), "u1 POST /orders", k, "fp", cfg.LockTTL, cfg.Retention, false)
		testenv.Must(t, err)
		if res.Outcome != idempotency.Claimed {
			t.Fatalf("seed %s: outcome %v", k, res.Outcome)
		}
		if k == "stale-processing" {
			continue // a request that crashed before completing
		}
		testenv.Must(t, store.Complete(context.Background(), nil, res.Claim,
			idempotency.Response{Status: http.StatusCreated, Body: []byte(`{}`)}, cfg.Retention))
	}
}

func remainingKeys(t *testing.T, app *testApp) []string {
	t.Helper()
	var keys []string
	testenv.Must(t, app.db.Raw("SELECT idem_key FROM idempotency_record").Scan(&keys).Error)
	sort.Strings(keys)
	return keys
}

func TestArchiverDeletesOnlyExpiredRecords(t *testing.T) {
	app := newTestApp(t)
	store := app.mw.Store()
	now := time.Now().UTC()
	var expired []string
	for i := range 5 {
		expired = append(expired, fmt.Sprintf("expired-%d", i))
	}
	seedRecords(t, store, now.Add(-49*time.Hour), append(expired, "stale-processing")...)
	seedRecords(t, store, now.Add(-23*time.Hour), "young-1", "young-2")
	seedRecords(t, store, now, "fresh-1")

	cfg := idempotency.DefaultConfig()
	cfg.ArchiveBatch = 2 // several batches for six expired rows
	arch, err := idempotency.NewArchiver(store, redislock.New(app.rdb, app.prefix), cfg, slog.Default(), prometheus.NewRegistry())
	testenv.Must(t, err)
	n, err := arch.RunOnce(context.Background())
	testenv.Must(t, err)
	if n != 6 {
		t.Errorf("deleted %d, want 6", n)
	}
	if got, want := fmt.Sprint(remainingKeys(t, app)), "[fresh-1 young-1 young-2]"; got != want {
		t.Fatalf("remaining %s, want %s", got, want)
	}
	if n, err := arch.RunOnce(context.Background()); err != nil || n != 0 {
		t.Fatalf("second run deleted %d (%v), want 0", n, err)
	}
}

// TestScheduledArchiverRunsUnderTheLock starts two replicas' archivers on a
// one-second schedule: the expired rows go, the rest stays, and the runs are
// serialised by the Redis lock (at most one holds it at a time).
func TestScheduledArchiverRunsUnderTheLock(t *testing.T) {
	app := newTestApp(t)
	store := app.mw.Store()
	seedRecords(t, store, time.Now().UTC().Add(-48*time.Hour), "old-1", "old-2", "old-3")
	seedRecords(t, store, time.Now().UTC(), "new-1")

	cfg := idempotency.DefaultConfig()
	cfg.ArchiveSchedule = "@every 1s"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 2 {
		arch, err := idempotency.NewArchiver(store, redislock.New(app.rdb, app.prefix), cfg, testenv.Logger(t), prometheus.NewRegistry())
		testenv.Must(t, err)
		testenv.Must(t, arch.Start(ctx))
		t.Cleanup(func() { _ = arch.Stop(context.Background()) })
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && app.records(t) != 1 {
		time.Sleep(100 * time.Millisecond)
	}
	if got := fmt.Sprint(remainingKeys(t, app)); got != "[new-1]" {
		t.Fatalf("remaining %s, want [new-1]", got)
	}
}

func TestExpiredRecordIsForgottenBeforeArchiving(t *testing.T) {
	app := newTestApp(t)
	store := app.mw.Store()
	seedRecords(t, store, time.Now().UTC().Add(-48*time.Hour), "reused-key")
	cfg := idempotency.DefaultConfig()
	// Past retention, the key is free again even with another body.
	res, err := store.Claim(context.Background(), "u1 POST /orders", "reused-key", "other-fp", cfg.LockTTL, cfg.Retention, true)
	testenv.Must(t, err)
	if res.Outcome != idempotency.Claimed {
		t.Fatalf("outcome %v, want Claimed", res.Outcome)
	}
	rec, err := store.Get(context.Background(), "u1 POST /orders", "reused-key")
	testenv.Must(t, err)
	if rec.Status != idempotency.StatusProcessing || rec.Fingerprint != "other-fp" || rec.Response.Status != 0 {
		t.Fatalf("record not reset: %+v", rec)
	}
	if !rec.ExpireTime.After(time.Now().Add(23 * time.Hour)) {
		t.Fatalf("expire_time %v not renewed", rec.ExpireTime)
	}
}
