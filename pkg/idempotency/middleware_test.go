package idempotency_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/testkit/idempotencytest"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

const orderBody = `{"sku":"SKU-1","quantity":2}`

func TestConcurrentRequestsWithOneKeyCreateOneOrder(t *testing.T) {
	eachGuard(t, func(t *testing.T, g guard) {
		app := newTestApp(t, g.opt)
		app.delay = 50 * time.Millisecond // keep the first in progress while the others arrive

		rs := idempotencytest.Race(app.handler, 50, app.order(idempotencytest.NewKey(), "u1", orderBody))

		if n := app.orders(t); n != 1 {
			t.Fatalf("%d orders for one key, want 1", n)
		}
		body := idempotencytest.CheckOneEffect(t, rs, http.StatusCreated)
		var o map[string]any
		if err := json.Unmarshal(body, &o); err != nil || o["order_no"] == "" {
			t.Fatalf("201 body is not the order: %s", body)
		}
		if got := app.metric(t, "idempotency_requests_total", "first"); got != 1 {
			t.Errorf("first=%d, want 1", got)
		}
	})
}

func TestSequentialRetriesReplayTheFirstResponse(t *testing.T) {
	eachGuard(t, func(t *testing.T, g guard) {
		app := newTestApp(t, g.opt)
		rs := idempotencytest.Sequential(app.handler, 5, app.order(idempotencytest.NewKey(), "u1", orderBody))

		if n := app.orders(t); n != 1 {
			t.Fatalf("%d orders after 5 retries, want 1", n)
		}
		for i, r := range rs {
			if r.Status != http.StatusCreated || string(r.Body) != string(rs[0].Body) {
				t.Errorf("response %d: %d %s, want the first 201 %s", i, r.Status, r.Body, rs[0].Body)
			}
			if r.Header.Get("Content-Type") != idempotency.JSONContentType {
				t.Errorf("response %d: Content-Type %q", i, r.Header.Get("Content-Type"))
			}
			if want := i > 0; r.Replayed != want {
				t.Errorf("response %d: replayed=%v, want %v", i, r.Replayed, want)
			}
		}
		if got := app.metric(t, "idempotency_requests_total", "replayed"); got != 4 {
			t.Errorf("replayed=%d, want 4", got)
		}
	})
}

func TestSameKeyDifferentBodyIsRefusedAndWritesNothing(t *testing.T) {
	eachGuard(t, func(t *testing.T, g guard) {
		app := newTestApp(t, g.opt)
		key := idempotencytest.NewKey()
		first := idempotencytest.Do(app.handler, app.order(key, "u1", orderBody))
		if first.Status != http.StatusCreated {
			t.Fatalf("first: %d %s", first.Status, first.Body)
		}

		// The same JSON with other key order and spacing is the same request.
		same := idempotencytest.Do(app.handler, app.order(key, "u1", "{ \"quantity\": 2,\n \"sku\": \"SKU-1\" }"))
		if same.Status != http.StatusCreated || !same.Replayed || string(same.Body) != string(first.Body) {
			t.Fatalf("reformatted body: %d replayed=%v %s", same.Status, same.Replayed, same.Body)
		}

		other := idempotencytest.Do(app.handler, app.order(key, "u1", `{"sku":"SKU-1","quantity":3}`))
		idempotencytest.CheckProblem(t, other, http.StatusUnprocessableEntity)
		if n := app.orders(t); n != 1 {
			t.Fatalf("%d orders, want 1: the mismatched request must write nothing", n)
		}

		// The entry layer is only a hint: with Redis flushed, the database still
		// tells the mismatch and the replay.
		testenv.Must(t, flushPrefix(app))
		other = idempotencytest.Do(app.handler, app.order(key, "u1", `{"sku":"SKU-2","quantity":2}`))
		idempotencytest.CheckProblem(t, other, http.StatusUnprocessableEntity)
		testenv.Must(t, flushPrefix(app))
		again := idempotencytest.Do(app.handler, app.order(key, "u1", orderBody))
		if again.Status != http.StatusCreated || !again.Replayed || string(again.Body) != string(first.Body) {
			t.Fatalf("replay after a Redis flush: %d replayed=%v %s", again.Status, again.Replayed, again.Body)
		}
		if n := app.orders(t); n != 1 {
			t.Fatalf("%d orders, want 1", n)
		}
		if got := app.metric(t, "idempotency_requests_total", "mismatch"); got != 2 {
			t.Errorf("mismatch=%d, want 2", got)
		}
	})
}

func flushPrefix(app *testApp) error {
	ctx := context.Background()
	keys, err := app.rdb.Keys(ctx, app.prefix+"*").Result()
	if err != nil || len(keys) == 0 {
		return err
	}
	return app.rdb.Del(ctx, keys...).Err()
}

func TestMissingOrMalformedKeyIs400(t *testing.T) {
	eachGuard(t, func(t *testing.T, g guard) {
		app := newTestApp(t, g.opt)
		cases := map[string]string{
			"missing":   "",
			"too short": "abc1234",
			"too long":  strings.Repeat("k", 256),
			"non-ascii": "clé-de-commande",
			"control":   "key\x01with-control",
		}
		for name, key := range cases {
			t.Run(name, func(t *testing.T) {
				r := idempotencytest.Do(app.handler, app.order(key, "u1", orderBody))
				idempotencytest.CheckProblem(t, r, http.StatusBadRequest)
			})
		}
		if n := app.orders(t); n != 0 {
			t.Fatalf("%d orders written by refused requests", n)
		}
		if got := app.metric(t, "idempotency_requests_total", "missing"); got != 1 {
			t.Errorf("missing=%d, want 1", got)
		}
		// Boundaries and the structured-field quoted form are accepted.
		for _, key := range []string{strings.Repeat("k", 8), strings.Repeat("k", 255), `"quoted-key-1"`} {
			if r := idempotencytest.Do(app.handler, app.order(key, "u1", orderBody)); r.Status != http.StatusCreated {
				t.Errorf("key %q: %d %s", key, r.Status, r.Body)
			}
		}
	})
}

func TestRedisDownStillOneOrder(t *testing.T) {
	eachGuard(t, func(t *testing.T, g guard) {
		app := newTestApp(t, g.opt, withDeadRedis())
		app.delay = 50 * time.Millisecond

		rs := idempotencytest.Race(app.handler, 50, app.order(idempotencytest.NewKey(), "u1", orderBody))

		if n := app.orders(t); n != 1 {
			t.Fatalf("%d orders with Redis down, want 1", n)
		}
		idempotencytest.CheckOneEffect(t, rs, http.StatusCreated)
		if got := app.metric(t, "idempotency_redis_fallbacks_total", ""); got != 50 {
			t.Errorf("redis fallbacks=%d, want 50", got)
		}
	})
}

func TestTransientFailureReleasesTheKey(t *testing.T) {
	eachGuard(t, func(t *testing.T, g guard) {
		app := newTestApp(t, g.opt)
		req := app.order(idempotencytest.NewKey(), "u1", orderBody)

		app.failures.Store(1)
		first := idempotencytest.Do(app.handler, req)
		idempotencytest.CheckProblem(t, first, http.StatusInternalServerError)
		if n := app.orders(t); n != 0 {
			t.Fatalf("the failed execution left %d orders", n)
		}
		if n := app.records(t); n != 0 {
			t.Fatalf("the failed execution left its claim (%d records)", n)
		}

		app.panics.Store(1)
		second := idempotencytest.Do(app.handler, req)
		idempotencytest.CheckProblem(t, second, http.StatusInternalServerError)

		third := idempotencytest.Do(app.handler, req)
		if third.Status != http.StatusCreated || third.Replayed {
			t.Fatalf("retry after failures: %d replayed=%v %s, want a fresh 201", third.Status, third.Replayed, third.Body)
		}
		fourth := idempotencytest.Do(app.handler, req)
		if fourth.Status != http.StatusCreated || !fourth.Replayed || string(fourth.Body) != string(third.Body) {
			t.Fatalf("after success: %d replayed=%v", fourth.Status, fourth.Replayed)
		}
		if n := app.orders(t); n != 1 {
			t.Fatalf("%d orders, want 1", n)
		}
		if got := app.metric(t, "idempotency_claims_released_total", ""); got != 2 {
			t.Errorf("released=%d, want 2", got)
		}
	})
}

func TestDeterministicClientErrorIsStoredAndReplayed(t *testing.T) {
	eachGuard(t, func(t *testing.T, g guard) {
		app := newTestApp(t, g.opt)
		req := app.order(idempotencytest.NewKey(), "u1", `{"sku":"","quantity":1}`)
		rs := idempotencytest.Sequential(app.handler, 3, req)
		for i, r := range rs {
			idempotencytest.CheckProblem(t, r, http.StatusBadRequest)
			if string(r.Body) != string(rs[0].Body) || r.Replayed != (i > 0) {
				t.Errorf("response %d: replayed=%v %s", i, r.Replayed, r.Body)
			}
		}
	})
}

func TestTwoUsersWithOneKeyGetTwoOrders(t *testing.T) {
	eachGuard(t, func(t *testing.T, g guard) {
		app := newTestApp(t, g.opt)
		key := idempotencytest.NewKey()
		a := idempotencytest.Do(app.handler, app.order(key, "alice", orderBody))
		b := idempotencytest.Do(app.handler, app.order(key, "bob", orderBody))
		if a.Status != http.StatusCreated || b.Status != http.StatusCreated || a.Replayed || b.Replayed {
			t.Fatalf("alice %d replayed=%v, bob %d replayed=%v", a.Status, a.Replayed, b.Status, b.Replayed)
		}
		if string(a.Body) == string(b.Body) {
			t.Fatal("bob got alice's order")
		}
		if n := app.orders(t); n != 2 {
			t.Fatalf("%d orders, want 2", n)
		}
	})
}

func TestHandlerWithoutTransactionIsRecordedByTheMiddleware(t *testing.T) {
	eachGuard(t, func(t *testing.T, g guard) {
		app := newTestApp(t, g.opt)
		req := idempotencytest.Request{Path: "/notes", Key: idempotencytest.NewKey(), Token: app.token("u1"), Body: []byte(`{"text":"hi"}`)}
		rs := idempotencytest.Sequential(app.handler, 3, req)
		for i, r := range rs {
			if r.Status != http.StatusCreated || string(r.Body) != string(rs[0].Body) {
				t.Fatalf("response %d: %d %s", i, r.Status, r.Body)
			}
			if r.Header.Get("Location") != rs[0].Header.Get("Location") || r.Header.Get("Content-Type") != rs[0].Header.Get("Content-Type") {
				t.Errorf("response %d: headers %v, want %v", i, r.Header, rs[0].Header)
			}
		}
		if !rs[1].Replayed || rs[0].Replayed {
			t.Error("replay marks wrong")
		}
	})
}

// TestReplayRepeatsTheHeadersCompletedInTheTransaction: a handler that
// completes its record inside its own transaction (CompleteInTx) gets the
// Location it set replayed with the body, under both guards. Before, only the
// Content-Type was recorded, and a replayed POST lost its Location.
func TestReplayRepeatsTheHeadersCompletedInTheTransaction(t *testing.T) {
	eachGuard(t, func(t *testing.T, g guard) {
		app := newTestApp(t, g.opt)
		rs := idempotencytest.Sequential(app.handler, 2, app.order(idempotencytest.NewKey(), "u1", orderBody))
		first, replay := rs[0], rs[1]
		if first.Status != http.StatusCreated || first.Replayed || !replay.Replayed {
			t.Fatalf("first %d replayed=%v, second replayed=%v", first.Status, first.Replayed, replay.Replayed)
		}
		loc := first.Header.Get("Location")
		if !strings.HasPrefix(loc, "/orders/") {
			t.Fatalf("first answer Location %q, want /orders/<no>", loc)
		}
		if got := replay.Header.Get("Location"); got != loc {
			t.Fatalf("replay Location %q, want the first answer's %q", got, loc)
		}
	})
}

// TestStaleClaimIsTakenOverAndTheOldOwnerRollsBack parks a request inside its
// transaction past its lock, lets a retry take the key over and finish, then
// lets the first one go on: its completion must find the claim lost and roll
// its order back, so exactly one order exists.
func TestStaleClaimIsTakenOverAndTheOldOwnerRollsBack(t *testing.T) {
	app := newTestApp(t)
	req := app.order(idempotencytest.NewKey(), "u1", orderBody)
	app.hold, app.entered = make(chan struct{}), make(chan struct{})
	hold := app.hold

	firstDone := make(chan idempotencytest.Response)
	go func() { firstDone <- idempotencytest.Do(app.handler, req) }()
	<-app.entered

	// While the lock runs, a retry is told to come back later.
	busy := idempotencytest.Do(app.handler, req)
	idempotencytest.CheckProblem(t, busy, http.StatusConflict)
	if busy.Header.Get("Retry-After") == "" {
		t.Error("409 without Retry-After")
	}

	// The first request hangs past its lock.
	testenv.Must(t, app.db.Exec("UPDATE idempotency_record SET locked_until = ?", time.Now().UTC().Add(-time.Second)).Error)
	second := idempotencytest.Do(app.handler, req)
	if second.Status != http.StatusCreated || second.Replayed {
		t.Fatalf("take-over: %d replayed=%v %s", second.Status, second.Replayed, second.Body)
	}

	close(hold)
	first := <-firstDone
	if first.Status != http.StatusInternalServerError {
		t.Fatalf("the overtaken request answered %d %s, want its failure", first.Status, first.Body)
	}
	if n := app.orders(t); n != 1 {
		t.Fatalf("%d orders, want 1: the overtaken request must roll back", n)
	}
	third := idempotencytest.Do(app.handler, req)
	if !third.Replayed || string(third.Body) != string(second.Body) {
		t.Fatalf("replay after take-over: %d %s, want %s", third.Status, third.Body, second.Body)
	}
}

// TestLostCommitAckIsReplayedNotRerun: the handler's transaction commits (the
// order and the record's completion together) but the handler answers 500,
// as it would when the COMMIT acknowledgement is lost. The key must not be
// released: the retry is answered from the committed record. HandlerInTx
// looks for a committed record before it lets a 5xx out, so there even the
// first answer is the committed 201.
func TestLostCommitAckIsReplayedNotRerun(t *testing.T) {
	eachGuard(t, func(t *testing.T, g guard) {
		app := newTestApp(t, g.opt)
		req := app.order(idempotencytest.NewKey(), "u1", orderBody)
		app.lostAcks.Store(1)
		first := idempotencytest.Do(app.handler, req)
		if g.inTx {
			if first.Status != http.StatusCreated || !first.Replayed {
				t.Fatalf("first: %d replayed=%v %s, want the committed 201", first.Status, first.Replayed, first.Body)
			}
		} else {
			idempotencytest.CheckProblem(t, first, http.StatusInternalServerError)
		}

		retry := idempotencytest.Do(app.handler, req)
		if retry.Status != http.StatusCreated || !retry.Replayed {
			t.Fatalf("retry: %d replayed=%v %s, want the committed 201 replayed", retry.Status, retry.Replayed, retry.Body)
		}
		if g.inTx && string(retry.Body) != string(first.Body) {
			t.Fatalf("retry %s, first %s", retry.Body, first.Body)
		}
		if n := app.orders(t); n != 1 {
			t.Fatalf("%d orders, want 1", n)
		}
		if got := app.metric(t, "idempotency_claims_released_total", ""); got != 0 {
			t.Errorf("released=%d, want 0", got)
		}
	})
}

func TestEntryLayerAnswers(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	e := idempotency.NewEntry(rdb, prefix, time.Minute)
	ctx := context.Background()
	for i, want := range []struct {
		fp   string
		hint idempotency.Hint
	}{
		{"fp-a", idempotency.HintFirst},
		{"fp-a", idempotency.HintDuplicate},
		{"fp-b", idempotency.HintMismatch},
	} {
		got, err := e.Check(ctx, "u1 POST /orders", "key-12345", want.fp)
		testenv.Must(t, err)
		if got != want.hint {
			t.Fatalf("check %d: %v, want %v", i, got, want.hint)
		}
	}
	// Forget only removes our own fingerprint's entry.
	testenv.Must(t, e.Forget(ctx, "u1 POST /orders", "key-12345", "fp-b"))
	if got, _ := e.Check(ctx, "u1 POST /orders", "key-12345", "fp-a"); got != idempotency.HintDuplicate {
		t.Fatalf("a foreign forget removed the entry: %v", got)
	}
	testenv.Must(t, e.Forget(ctx, "u1 POST /orders", "key-12345", "fp-a"))
	if got, _ := e.Check(ctx, "u1 POST /orders", "key-12345", "fp-b"); got != idempotency.HintFirst {
		t.Fatalf("after forget: %v, want first", got)
	}
	// Other scopes never see the key.
	if got, _ := e.Check(ctx, "u2 POST /orders", "key-12345", "fp-a"); got != idempotency.HintFirst {
		t.Fatalf("another caller's key collided: %v", got)
	}
}

// TestConcurrentTakeOverOfAStaleClaimHasOneWinner leaves a claim behind as a
// crashed request would, lets its lock run out, and races 30 retries at it:
// the conditional take-over must let exactly one of them run.
func TestConcurrentTakeOverOfAStaleClaimHasOneWinner(t *testing.T) {
	eachGuard(t, func(t *testing.T, g guard) {
		app := newTestApp(t, g.opt)
		app.delay = 30 * time.Millisecond
		req := app.order(idempotencytest.NewKey(), "u1", orderBody)

		app.insertCrashedClaim(t, req)

		rs := idempotencytest.Race(app.handler, 30, req)
		if n := app.orders(t); n != 1 {
			t.Fatalf("%d orders after racing a stale claim, want 1", n)
		}
		idempotencytest.CheckOneEffect(t, rs, http.StatusCreated)
	})
}

// TestDeadRedisIsLeftAloneForAPause: once Redis has failed, the next
// requests within the pause decide on the database without dialling it
// again (each dial of a refused port costs the client most of a second);
// they are still counted as fallbacks and still have one effect.
func TestDeadRedisIsLeftAloneForAPause(t *testing.T) {
	eachGuard(t, func(t *testing.T, g guard) {
		var dials atomic.Int64
		app := newTestApp(t, g.opt, func(a *testApp, _ *idempotency.Config) {
			// PoolSize well above the dial errors one request causes: at
			// PoolSize consecutive errors go-redis starts redialling in the
			// background, which would count here.
			a.rdb = redis.NewClient(&redis.Options{
				Addr:       "127.0.0.1:1",
				MaxRetries: 1,
				PoolSize:   64,
				Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
					dials.Add(1)
					return (&net.Dialer{}).DialContext(ctx, network, addr)
				},
			})
		})
		req := app.order(idempotencytest.NewKey(), "u1", orderBody)
		first := idempotencytest.Do(app.handler, req)
		if first.Status != http.StatusCreated {
			t.Fatalf("first: %d %s", first.Status, first.Body)
		}
		afterFirst := dials.Load()
		if afterFirst == 0 {
			t.Fatal("the first request never tried Redis")
		}
		for i := range 4 {
			r := idempotencytest.Do(app.handler, req)
			if r.Status != http.StatusCreated || !r.Replayed {
				t.Fatalf("retry %d: %d replayed=%v", i, r.Status, r.Replayed)
			}
		}
		if got := dials.Load(); got != afterFirst {
			t.Errorf("%d more dials during the pause, want 0", got-afterFirst)
		}
		if got := app.metric(t, "idempotency_redis_fallbacks_total", ""); got != 5 {
			t.Errorf("fallbacks=%d, want 5", got)
		}
		if n := app.orders(t); n != 1 {
			t.Fatalf("%d orders, want 1", n)
		}
	})
}
