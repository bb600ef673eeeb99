package idempotency_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncemall/oncemall/pkg/idempotency"
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
	arch, err := idempotency.NewArchiver(store, cfg, slog.Default(), prometheus.NewRegistry())
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

// TestDefaultArchiverOutpacesTwoHundredPurchasesPerSecond: a purchase leaves
// two records (its order's and its payment's key), so 200 purchases/s write
// 400 records/s; what the default archiver may delete per tick of its
// schedule must exceed what arrives meanwhile, with room for a backlog.
// (BenchmarkArchiver measures how fast those deletions run.)
func TestDefaultArchiverOutpacesTwoHundredPurchasesPerSecond(t *testing.T) {
	cfg := idempotency.DefaultConfig()
	every, ok := strings.CutPrefix(cfg.ArchiveSchedule, "@every ")
	if !ok {
		t.Fatalf("schedule %q: want an @every interval", cfg.ArchiveSchedule)
	}
	interval, err := time.ParseDuration(every)
	testenv.Must(t, err)
	perRun := float64(cfg.ArchiveBatch * cfg.ArchiveMaxBatches)
	arriving := 400 * interval.Seconds()
	if perRun < 10*arriving {
		t.Fatalf("the archiver may delete %.0f records per %s run; 200 purchases/s write %.0f meanwhile: want 10× headroom", perRun, interval, arriving)
	}
}
