package app_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/coupon/internal/assembly"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
	"github.com/oncemall/oncemall/services/coupon/internal/coupontest"
	"github.com/oncemall/oncemall/services/coupon/internal/orderclient"
)

// clock is a settable time for the app (setClock).
type clock struct{ now time.Time }

func (c *clock) read() time.Time { return c.now }

func (f *fixture) clockAt(t time.Time) *clock {
	c := &clock{now: t}
	f.setClock(c.read)
	return c
}

// TestSweeperReleasesOnlyLocksWhoseOrderWillNeverUseThem runs the order
// service's side of placing an order up to the point where it fails, as the
// order service would: it locks the coupon, then its transaction fails (and
// the release call it owes is lost), or the process crashes before the
// commit, or the order commits and is later cancelled (its order.cancelled
// lost), waits for payment, or is paid (its order.paid not yet deducted).
// Before the lock's deadline the sweeper does not even ask; after it, the
// order service's answer decides, and only a lock whose order does not
// exist or was cancelled goes back to UNUSED, free for another order.
func TestSweeperReleasesOnlyLocksWhoseOrderWillNeverUseThem(t *testing.T) {
	tests := []struct {
		name string
		// place is what the order service did after the lock: its
		// transaction, and what became of the order.
		place    func(o *orderService, orderNo string)
		released bool
	}{
		{"the order transaction failed after the lock", func(o *orderService, no string) {
			// The insert failed and rolled back; the release call the
			// order service then owes did not arrive.
			o.begin(no)
			o.rollback(no)
		}, true},
		{"the order service crashed before committing", func(o *orderService, no string) {
			// The process died with the transaction open: nothing of the
			// order was written, and nobody was left to release.
			o.begin(no)
			o.crash()
		}, true},
		{"the order was cancelled and its event lost", func(o *orderService, no string) {
			o.begin(no)
			o.commit(no)
			o.set(no, "CANCELLED")
		}, true},
		{"the order still waits for its payment", func(o *orderService, no string) {
			o.begin(no)
			o.commit(no)
		}, false},
		{"the order is paid, its deduction on the way", func(o *orderService, no string) {
			o.begin(no)
			o.commit(no)
			o.set(no, "PAID")
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, variant.Fixed)
			c := f.issue(t, 7)
			clk := f.clockAt(time.Now().UTC())
			l := f.lock(t, c.ID, "ORDER-1", 7)
			tt.place(f.orders, "ORDER-1")

			clk.now = l.LockedUntil.Add(-time.Millisecond)
			r, err := f.app.SweepLocks(ctx)
			if err != nil || r.Overdue != 0 || f.orders.asked.Load() != 0 {
				t.Fatalf("before the deadline: %+v, %v, order service asked %d times; want nothing looked at",
					r, err, f.orders.asked.Load())
			}

			clk.now = l.LockedUntil.Add(time.Second)
			r, err = f.app.SweepLocks(ctx)
			testenv.Must(t, err)
			got := f.lockRow(t, c.ID)
			switch {
			case tt.released && (r.Released != 1 || got.Status != coupon.StatusUnused || got.LockedOrderNo != ""):
				t.Fatalf("pass %+v, coupon %+v; want the lock released", r, got)
			case !tt.released && (r.Kept != 1 || got.Status != coupon.StatusLocked || got.LockedOrderNo != "ORDER-1"):
				t.Fatalf("pass %+v, coupon %+v; want the lock kept", r, got)
			}
			if f.orders.asked.Load() != 1 {
				t.Fatalf("order service asked %d times, want once", f.orders.asked.Load())
			}
			if !tt.released {
				return
			}
			if v := f.metric(t, "coupon_lock_releases_total", "sweep"); v != 1 {
				t.Fatalf("coupon_lock_releases_total{by=sweep} = %v", v)
			}
			// Released once: a second pass finds nothing, and the coupon is
			// free for the customer's next order.
			if r, _ := f.app.SweepLocks(ctx); r.Overdue != 0 {
				t.Fatalf("second pass looked at %+v", r)
			}
			if l := f.lock(t, c.ID, "ORDER-2", 7); l.OrderNo != "ORDER-2" {
				t.Fatalf("relock = %+v", l)
			}
		})
	}
}

// TestSweeperLeavesLocksForTheNextPassWhileTheOrderServiceIsDown: an order
// service that cannot be reached decides nothing. The pass stops with the
// error (the job counts it failed) and the lock waits; once the order
// service is back, the next pass releases it.
func TestSweeperLeavesLocksForTheNextPassWhileTheOrderServiceIsDown(t *testing.T) {
	orders := newOrderService(t)
	fwd := testenv.NewForwarder(t, orders.srv.Listener.Addr().String())
	f := newFixtureWithOrders(t, testDB(t), coupontest.Settings(t, nil),
		assembly.Options{Orders: orderclient.New("http://"+fwd.Addr(), internalToken, &http.Client{Timeout: time.Second})}, orders)
	first, second := f.issue(t, 7), f.issue(t, 7)
	clk := f.clockAt(time.Now().UTC())
	f.lock(t, first.ID, "GONE-1", 7)
	l := f.lock(t, second.ID, "GONE-2", 7)
	clk.now = l.LockedUntil.Add(time.Minute)

	fwd.Close()
	r, err := f.app.SweepLocks(ctx)
	if !errors.Is(err, coupon.ErrOrderServiceUnavailable) || r.Unreachable != 1 || r.Released != 0 || r.Overdue != 1 {
		t.Fatalf("pass with the order service down: %+v, %v; want it stopped at the first lock, unavailable", r, err)
	}
	for _, id := range []uint64{first.ID, second.ID} {
		if got := f.lockRow(t, id); got.Status != coupon.StatusLocked {
			t.Fatalf("coupon %d = %+v, want still LOCKED", id, got)
		}
	}
	if v := f.metric(t, "coupon_sweep_decisions_total", "unreachable"); v != 1 {
		t.Fatalf("coupon_sweep_decisions_total{decision=unreachable} = %v", v)
	}

	fwd.Reopen()
	r, err = f.app.SweepLocks(ctx)
	if err != nil || r.Released != 2 {
		t.Fatalf("pass with the order service back: %+v, %v; want both released", r, err)
	}
}

// TestSweeperTakesOnlyTheOrderServicesOwn404ForNotFound: a 404 that is not
// a problem document (a wrong ORDER_URL, a proxy in the way) or a 401 says
// nothing about the order, and the lock is kept.
func TestSweeperTakesOnlyTheOrderServicesOwn404ForNotFound(t *testing.T) {
	for name, handler := range map[string]http.HandlerFunc{
		"a plain 404": http.NotFound,
		"a 401":       func(w http.ResponseWriter, r *http.Request) { writeProblem(w, http.StatusUnauthorized, "who are you") },
		"another order": func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`{"order_no":"SOMEONE-ELSE","status":"CANCELLED"}`))
		},
		"an unknown status": func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`{"order_no":"ORDER-1","status":"SHIPPED"}`))
		},
	} {
		t.Run(name, func(t *testing.T) {
			stray := httptest.NewServer(handler)
			t.Cleanup(stray.Close)
			f := newFixtureWithOrders(t, testDB(t), coupontest.Settings(t, nil),
				assembly.Options{Orders: orderclient.New(stray.URL, internalToken, &http.Client{Timeout: time.Second})}, newOrderService(t))
			c := f.issue(t, 7)
			clk := f.clockAt(time.Now().UTC())
			l := f.lock(t, c.ID, "ORDER-1", 7)
			clk.now = l.LockedUntil.Add(time.Minute)
			r, err := f.app.SweepLocks(ctx)
			if err != nil || r.BadAnswers != 1 || r.Released != 0 {
				t.Fatalf("pass %+v, %v; want one bad answer and nothing released", r, err)
			}
			if got := f.lockRow(t, c.ID); got.Status != coupon.StatusLocked {
				t.Fatalf("coupon = %+v, want LOCKED", got)
			}
		})
	}
}

// TestSweeperPagesPastTheLocksItKeeps: with pages of two, kept locks at the
// front do not hide the releasable ones behind them.
func TestSweeperPagesPastTheLocksItKeeps(t *testing.T) {
	f := newFixtureWith(t, testDB(t), coupontest.Settings(t, map[string]string{"COUPON_SWEEP_BATCH": "2"}), assembly.Options{})
	clk := f.clockAt(time.Now().UTC())
	var l coupon.Lock
	var gone []uint64
	for i, status := range []string{"WAIT_PAY", "PAID", "WAIT_PAY", "", "CANCELLED"} {
		c := f.issue(t, 7)
		no := "ORDER-" + string(rune('A'+i))
		l = f.lock(t, c.ID, no, 7)
		f.orders.set(no, status)
		if status == "" || status == "CANCELLED" {
			gone = append(gone, c.ID)
		}
	}
	clk.now = l.LockedUntil.Add(time.Minute)
	r, err := f.app.SweepLocks(ctx)
	if err != nil || r.Overdue != 5 || r.Kept != 3 || r.Released != 2 {
		t.Fatalf("pass %+v, %v; want 5 looked at, 3 kept, 2 released", r, err)
	}
	for _, id := range gone {
		if got := f.lockRow(t, id); got.Status != coupon.StatusUnused {
			t.Fatalf("coupon %d = %+v, want released", id, got)
		}
	}
}

// TestSweeperLeavesALockSettledWhileItAsked: the order.cancelled consumer (or
// a release call) frees the lock, and another order takes the coupon, while
// the sweeper waits for the order service's answer; the sweeper's release is
// conditional on the first order still holding the lock, so the second
// order keeps its lock.
func TestSweeperLeavesALockSettledWhileItAsked(t *testing.T) {
	f := newFixture(t, variant.Fixed)
	c := f.issue(t, 7)
	clk := f.clockAt(time.Now().UTC())
	l := f.lock(t, c.ID, "FIRST", 7)
	f.orders.set("FIRST", "CANCELLED")
	f.orders.beforeAnswer = func() {
		if ok, err := f.app.ReleaseLock(ctx, c.ID, "FIRST", ""); err != nil || !ok {
			t.Errorf("release while the sweeper asks: %v, %v", ok, err)
		}
		if _, err := f.app.LockCoupon(ctx, c.ID, coupon.LockRequest{OrderNo: "SECOND", UserID: 7, OrderAmount: orderAmount}); err != nil {
			t.Errorf("lock by SECOND while the sweeper asks: %v", err)
		}
	}
	clk.now = l.LockedUntil.Add(time.Minute)
	r, err := f.app.SweepLocks(ctx)
	if err != nil || r.Released != 0 || r.Kept != 1 {
		t.Fatalf("pass %+v, %v; want nothing released", r, err)
	}
	if got := f.lockRow(t, c.ID); got.Status != coupon.StatusLocked || got.LockedOrderNo != "SECOND" {
		t.Fatalf("coupon = %+v, want LOCKED by SECOND", got)
	}
}
