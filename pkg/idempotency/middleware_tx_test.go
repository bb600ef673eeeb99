package idempotency_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/testkit/idempotencytest"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// inTx is the option selecting HandlerInTx.
var inTx = guards[1].opt

// startParked sends req and returns once its execution is parked inside its
// transaction (before CompleteInTx, or after it with late).
func startParked(t *testing.T, app *testApp, req idempotencytest.Request, late bool) (release func() idempotencytest.Response) {
	t.Helper()
	app.hold, app.entered, app.holdLate = make(chan struct{}), make(chan struct{}), late
	hold := app.hold
	done := make(chan idempotencytest.Response, 1)
	go func() { done <- idempotencytest.Do(app.handler, req) }()
	<-app.entered
	return func() idempotencytest.Response {
		close(hold)
		return <-done
	}
}

// TestInTxDuplicateWaitsForTheFirstCommitAndReplays: with the entry layer
// blind (Redis flushed), a duplicate of a request whose transaction holds
// the record's uncommitted row runs its handler and then waits on that row;
// when the first commits, the duplicate's transaction rolls back and it is
// answered with the first response.
func TestInTxDuplicateWaitsForTheFirstCommitAndReplays(t *testing.T) {
	app := newTestApp(t, inTx)
	req := app.order(idempotencytest.NewKey(), "u1", orderBody)
	release := startParked(t, app, req, true)

	testenv.Must(t, flushPrefix(app))
	dupDone := make(chan idempotencytest.Response, 1)
	go func() { dupDone <- idempotencytest.Do(app.handler, req) }()
	select {
	case r := <-dupDone:
		t.Fatalf("the duplicate answered %d %s while the first held the key's row", r.Status, r.Body)
	case <-time.After(300 * time.Millisecond):
	}

	first := release()
	dup := <-dupDone
	if first.Status != http.StatusCreated || first.Replayed {
		t.Fatalf("first: %d replayed=%v %s", first.Status, first.Replayed, first.Body)
	}
	if dup.Status != http.StatusCreated || !dup.Replayed || string(dup.Body) != string(first.Body) {
		t.Fatalf("duplicate: %d replayed=%v %s, want the first 201 %s replayed", dup.Status, dup.Replayed, dup.Body, first.Body)
	}
	if n := app.orders(t); n != 1 {
		t.Fatalf("%d orders, want 1: the duplicate's transaction must roll back", n)
	}
	if n := app.records(t); n != 1 {
		t.Fatalf("%d records, want 1", n)
	}
}

// TestInTxDuplicateWhileRunningIs409: with Redis up, a duplicate of a
// request that is still running is told to come back, without running the
// handler; after the first commits, the retry is replayed.
func TestInTxDuplicateWhileRunningIs409(t *testing.T) {
	app := newTestApp(t, inTx)
	req := app.order(idempotencytest.NewKey(), "u1", orderBody)
	release := startParked(t, app, req, false)

	busy := idempotencytest.Do(app.handler, req)
	idempotencytest.CheckProblem(t, busy, http.StatusConflict)
	if busy.Header.Get("Retry-After") != "1" {
		t.Errorf("409 with Retry-After %q, want 1", busy.Header.Get("Retry-After"))
	}
	first := release()
	if first.Status != http.StatusCreated {
		t.Fatalf("first: %d %s", first.Status, first.Body)
	}
	again := idempotencytest.Do(app.handler, req)
	if !again.Replayed || string(again.Body) != string(first.Body) {
		t.Fatalf("retry: %d replayed=%v %s", again.Status, again.Replayed, again.Body)
	}
	if n := app.orders(t); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}
	if got := app.metric(t, "idempotency_requests_total", "conflict"); got != 1 {
		t.Errorf("conflict=%d, want 1", got)
	}
}

// TestInTxTheFirstToCommitWins: the first request is parked before its
// record insert while a duplicate (Redis flushed) runs and commits; the
// first then finds the key taken, rolls back, and answers with the
// duplicate's response. One order, whoever came first.
func TestInTxTheFirstToCommitWins(t *testing.T) {
	app := newTestApp(t, inTx)
	req := app.order(idempotencytest.NewKey(), "u1", orderBody)
	release := startParked(t, app, req, false)

	testenv.Must(t, flushPrefix(app))
	dup := idempotencytest.Do(app.handler, req)
	if dup.Status != http.StatusCreated || dup.Replayed {
		t.Fatalf("duplicate: %d replayed=%v %s, want a fresh 201", dup.Status, dup.Replayed, dup.Body)
	}
	first := release()
	if first.Status != http.StatusCreated || !first.Replayed || string(first.Body) != string(dup.Body) {
		t.Fatalf("first: %d replayed=%v %s, want the committed %s", first.Status, first.Replayed, first.Body, dup.Body)
	}
	if n := app.orders(t); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}
}

// TestInTxOldEntryWithoutRecordFreesTheKey: an entry-layer marker younger
// than the lock TTL with no record behind it means "still running" (409);
// older, it is the trace of a request that died, and the key runs.
func TestInTxOldEntryWithoutRecordFreesTheKey(t *testing.T) {
	app := newTestApp(t, inTx, func(_ *testApp, c *idempotency.Config) { c.LockTTL = time.Second })
	req := app.order(idempotencytest.NewKey(), "u1", orderBody)
	entry := idempotency.NewEntry(app.rdb, app.prefix, idempotency.DefaultConfig().EntryTTL)
	_, err := entry.Check(context.Background(), "1 POST /orders", req.Key, idempotency.Fingerprint(http.MethodPost, "/orders", req.Body))
	testenv.Must(t, err)

	idempotencytest.CheckProblem(t, idempotencytest.Do(app.handler, req), http.StatusConflict)
	time.Sleep(1100 * time.Millisecond)
	r := idempotencytest.Do(app.handler, req)
	if r.Status != http.StatusCreated || r.Replayed {
		t.Fatalf("after the lock TTL: %d replayed=%v %s, want a fresh 201", r.Status, r.Replayed, r.Body)
	}
	if n := app.orders(t); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}
}

// TestInTxStaleRecordIsClearedAndTheRetryRuns: a PROCESSING claim left by
// Handler (the route was switched) whose lock ran out, met by a request the
// entry layer has not seen: its transaction rolls back, the stale record is
// cleared, the client is asked to retry, and the retry creates the order.
func TestInTxStaleRecordIsClearedAndTheRetryRuns(t *testing.T) {
	app := newTestApp(t, inTx)
	req := app.order(idempotencytest.NewKey(), "u1", orderBody)
	app.insertCrashedClaim(t, req)

	first := idempotencytest.Do(app.handler, req)
	idempotencytest.CheckProblem(t, first, http.StatusConflict)
	if n := app.orders(t); n != 0 {
		t.Fatalf("%d orders after the refused attempt, want 0", n)
	}
	if n := app.records(t); n != 0 {
		t.Fatalf("%d records, want the stale one cleared", n)
	}
	retry := idempotencytest.Do(app.handler, req)
	if retry.Status != http.StatusCreated || retry.Replayed {
		t.Fatalf("retry: %d replayed=%v %s", retry.Status, retry.Replayed, retry.Body)
	}
	if n := app.orders(t); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}
}
