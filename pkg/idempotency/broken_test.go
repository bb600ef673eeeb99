package idempotency_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/testkit/idempotencytest"
)

// TestBrokenCheckThenAct shows why the broken guard survives review: one
// retry after another is replayed, one order. Under concurrency (requests
// arriving while the first is still in its transaction) every racer runs
// the handler; the fixed guard on the same handler lets exactly one through.
func TestBrokenCheckThenAct(t *testing.T) {
	a := newTestApp(t)
	a.handler.(*gin.Engine).POST("/broken/orders", a.mw.HandlerFor(idempotency.GuardBroken), a.createOrder)
	broken := func(key string) idempotencytest.Request {
		r := a.order(key, "7", `{"sku":"A","quantity":1}`)
		r.Path = "/broken/orders"
		return r
	}

	rs := idempotencytest.Sequential(a.handler, 3, broken(idempotencytest.NewKey()))
	if n := a.orders(t); n != 1 {
		t.Fatalf("sequential retries through the broken guard: %d orders, want 1", n)
	}
	for i, r := range rs {
		if r.Status != http.StatusCreated || string(r.Body) != string(rs[0].Body) || r.Replayed != (i > 0) {
			t.Fatalf("sequential retry %d: %d replayed=%v %s", i, r.Status, r.Replayed, r.Body)
		}
	}

	a.delay = 50 * time.Millisecond // the first request is still in its transaction when the others check
	before := a.orders(t)
	idempotencytest.Race(a.handler, 20, broken(idempotencytest.NewKey()))
	if n := a.orders(t) - before; n < 2 {
		t.Fatalf("20 concurrent requests through the broken guard: %d orders, want the incident (more than 1)", n)
	}

	before = a.orders(t)
	rs = idempotencytest.Race(a.handler, 20, a.order(idempotencytest.NewKey(), "7", `{"sku":"A","quantity":1}`))
	if n := a.orders(t) - before; n != 1 {
		t.Fatalf("20 concurrent requests through the fixed guard: %d orders, want 1", n)
	}
	idempotencytest.CheckOneEffect(t, rs, http.StatusCreated)
}

func TestHandlerForRefusesUnknownModes(t *testing.T) {
	a := newTestApp(t)
	for name, f := range map[string]func(string) gin.HandlerFunc{"HandlerFor": a.mw.HandlerFor, "HandlerInTxFor": a.mw.HandlerInTxFor} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s(\"fast\") did not panic", name)
				}
			}()
			f("fast")
		}()
	}
}
