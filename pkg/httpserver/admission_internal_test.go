package httpserver

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// TestOverloadIsLoggedOncePerEpisode: many refusals log one warning that
// an overload started; the first request after overloadQuiet without a
// refusal logs that it ended, with the count; a later refusal starts a new
// episode. The clock is the test's, so the quiet spell costs no waiting.
func TestOverloadIsLoggedOncePerEpisode(t *testing.T) {
	logs := &testenv.SyncBuffer{}
	cfg := AdmissionConfig{MaxInFlight: 1, QueueTimeout: time.Second, RetryAfterMin: time.Second, RetryAfterMax: time.Second}
	a, err := newAdmission(cfg, nil, slog.New(slog.NewJSONHandler(logs, nil)), prometheus.NewRegistry())
	testenv.Must(t, err)
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a.now = func() time.Time { return clock }
	ctx := context.Background()
	lines := func(msg string) int { return strings.Count(logs.String(), `"msg":"`+msg) }

	if _, ok := a.acquire(ctx, classNew); !ok {
		t.Fatal("the first request was refused")
	}
	for range 100 {
		if r, ok := a.acquire(ctx, classNew); ok || r != refusedQueueFull {
			t.Fatalf("a request beyond the limit: admitted %v, reason %v; want queue_full", ok, r)
		}
		clock = clock.Add(100 * time.Millisecond)
	}
	if n := lines("overload: refusing"); n != 1 {
		t.Fatalf("%d warnings for 100 refusals, want 1:\n%s", n, logs)
	}

	// Still refusing 5 s after the last refusal: the episode goes on.
	clock = clock.Add(overloadQuiet / 2)
	a.noteQuiet()
	if lines("overload ended") != 0 {
		t.Fatalf("the overload ended %s after the last refusal, before overloadQuiet:\n%s", overloadQuiet/2, logs)
	}

	// Quiet for overloadQuiet: the next request (a probe here) ends it.
	clock = clock.Add(overloadQuiet)
	a.release(classNew)
	a.noteQuiet()
	if n := lines("overload ended"); n != 1 || !strings.Contains(logs.String(), `"refused":100`) {
		t.Fatalf("%d 'overload ended' lines, want 1 counting the 100 refusals:\n%s", n, logs)
	}

	// A new overload is a new episode.
	if _, ok := a.acquire(ctx, classNew); !ok {
		t.Fatal("a request after the overload was refused")
	}
	a.acquire(ctx, classNew)
	if n := lines("overload: refusing"); n != 2 {
		t.Fatalf("%d start warnings after a second overload, want 2:\n%s", n, logs)
	}
}
