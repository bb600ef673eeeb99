package app_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/pkg/lab/fault"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/assembly"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
	"github.com/oncemall/oncemall/services/coupon/internal/coupontest"
	"github.com/oncemall/oncemall/services/coupon/migrations"
)

// lockRow reads the coupon from the database: what a lock or a release
// wrote.
func (f *fixture) lockRow(t testing.TB, couponID uint64) coupon.Coupon {
	t.Helper()
	c, err := f.store.Coupon(ctx, couponID)
	testenv.Must(t, err)
	return c
}

func TestLockReturnsTheDiscountAndADeadlineOneTTLAhead(t *testing.T) {
	f := newFixture(t, variant.Fixed)
	c := f.issue(t, 7)
	now := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	f.setClock(func() time.Time { return now })
	l := f.lock(t, c.ID, "ORDER-1", 7)
	want := coupon.Lock{CouponID: c.ID, OrderNo: "ORDER-1", DiscountAmount: 1000,
		LockedUntil: now.Add(f.cfg.LockTTL).Truncate(time.Millisecond)}
	if l != want {
		t.Fatalf("lock = %+v, want %+v", l, want)
	}
	got := f.lockRow(t, c.ID)
	if got.Status != coupon.StatusLocked || got.LockedOrderNo != "ORDER-1" || !got.LockedUntil.Equal(l.LockedUntil) || got.Version != 1 {
		t.Fatalf("coupon = %+v", got)
	}
	if v := f.metric(t, "coupon_lock_requests_total", "locked"); v != 1 {
		t.Fatalf("coupon_lock_requests_total{outcome=locked} = %v", v)
	}
}

// TestLockRefusalsNameTheirReasonAndWriteNothing: each refusal of the
// contract, on a coupon that stays as it was.
func TestLockRefusalsNameTheirReasonAndWriteNothing(t *testing.T) {
	f := newFixture(t, variant.Fixed)
	minimum, err := f.app.CreateTemplate(ctx, coupon.Template{Name: "10 off 50", DiscountAmount: 1000, MinOrderAmount: 5000})
	testenv.Must(t, err)
	issue := func(tplID uint64) coupon.Coupon {
		c, err := f.app.IssueCoupon(ctx, tplID, 7)
		testenv.Must(t, err)
		return c
	}
	held := f.issue(t, 7)
	f.lock(t, held.ID, "HOLDER", 7)
	used := f.issue(t, 7)
	f.lock(t, used.ID, "PAID", 7)
	if out, err := f.app.ProcessMessage(ctx, f.land(t, "m-paid", "PAID", 7, used.ID)); out != app.Deducted {
		t.Fatalf("deduct the used coupon: %s, %v", out, err)
	}
	expiring := f.issue(t, 7)
	withMinimum := issue(minimum.ID)
	plain := f.issue(t, 7)
	later := time.Now().UTC().Add(time.Duration(coupon.DefaultValidDays) * 24 * time.Hour)

	tests := []struct {
		name   string
		coupon uint64
		req    coupon.LockRequest
		now    time.Time
		reason string
	}{
		{"unknown coupon", plain.ID + 1000, coupon.LockRequest{OrderNo: "O", UserID: 7, OrderAmount: 5000}, time.Time{}, "not_found"},
		{"another user's coupon", plain.ID, coupon.LockRequest{OrderNo: "O", UserID: 8, OrderAmount: 5000}, time.Time{}, "not_owner"},
		{"locked by another order", held.ID, coupon.LockRequest{OrderNo: "O", UserID: 7, OrderAmount: 5000}, time.Time{}, "not_available"},
		{"used by another order", used.ID, coupon.LockRequest{OrderNo: "O", UserID: 7, OrderAmount: 5000}, time.Time{}, "not_available"},
		{"expired", expiring.ID, coupon.LockRequest{OrderNo: "O", UserID: 7, OrderAmount: 5000}, later, "expired"},
		{"below the template's minimum", withMinimum.ID, coupon.LockRequest{OrderNo: "O", UserID: 7, OrderAmount: 4999}, time.Time{}, "below_minimum"},
		{"not above the discount", plain.ID, coupon.LockRequest{OrderNo: "O", UserID: 7, OrderAmount: 1000}, time.Time{}, "below_minimum"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.setClock(func() time.Time {
				if tt.now.IsZero() {
					return time.Now().UTC()
				}
				return tt.now
			})
			before, _ := f.store.Coupon(ctx, tt.coupon)
			_, err := f.app.LockCoupon(ctx, tt.coupon, tt.req)
			if reason, ok := coupon.RefusalReason(err); !ok || reason != tt.reason {
				t.Fatalf("err = %v (reason %q), want the refusal %q", err, reason, tt.reason)
			}
			after, _ := f.store.Coupon(ctx, tt.coupon)
			if fmt.Sprint(before) != fmt.Sprint(after) {
				t.Fatalf("a refused lock changed the coupon:\n%+v\n%+v", before, after)
			}
			if v := f.metric(t, "coupon_lock_requests_total", tt.reason); v < 1 {
				t.Fatalf("coupon_lock_requests_total{outcome=%s} = %v", tt.reason, v)
			}
		})
	}
	if n := f.count(t, "coupons", "status = ?", "LOCKED"); n != 1 {
		t.Fatalf("%d coupons LOCKED, want only the holder's", n)
	}
	if _, err := f.app.LockCoupon(ctx, plain.ID, coupon.LockRequest{OrderNo: "", UserID: 7, OrderAmount: 5000}); !errors.Is(err, coupon.ErrInvalid) {
		t.Fatalf("no order number: err = %v, want ErrInvalid", err)
	}
}

// TestManyOrdersRaceForOneCouponAndOneWins: many different orders lock the
// same coupon at once; exactly one gets the lock, every other one is
// refused as not available, and the coupon names the winner.
func TestManyOrdersRaceForOneCouponAndOneWins(t *testing.T) {
	f := newFixture(t, variant.Fixed)
	c := f.issue(t, 7)
	const n = 50
	type answer struct {
		lock coupon.Lock
		err  error
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			l, err := f.app.LockCoupon(ctx, c.ID, coupon.LockRequest{OrderNo: fmt.Sprintf("ORDER-%02d", i), UserID: 7, OrderAmount: orderAmount})
			answers[i] = answer{l, err}
		})
	}
	close(start)
	wg.Wait()
	var winners []coupon.Lock
	for i, a := range answers {
		switch reason, _ := coupon.RefusalReason(a.err); {
		case a.err == nil:
			winners = append(winners, a.lock)
		case reason != "not_available":
			t.Fatalf("order %d: %v, want the lock or not_available", i, a.err)
		}
	}
	if len(winners) != 1 {
		t.Fatalf("%d orders got the lock, want exactly 1: %+v", len(winners), winners)
	}
	got := f.lockRow(t, c.ID)
	if got.Status != coupon.StatusLocked || got.LockedOrderNo != winners[0].OrderNo || got.Version != 1 {
		t.Fatalf("coupon = %+v, want LOCKED once by %s", got, winners[0].OrderNo)
	}
}

// TestOneOrdersConcurrentRetriesAllGetTheSameLock: many identical lock
// calls of one order at once (its retries after lost answers) all get the
// same lock, deadline included, and the coupon was locked once.
func TestOneOrdersConcurrentRetriesAllGetTheSameLock(t *testing.T) {
	f := newFixture(t, variant.Fixed)
	c := f.issue(t, 7)
	const n = 50
	locks := make([]coupon.Lock, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			locks[i], errs[i] = f.app.LockCoupon(ctx, c.ID, coupon.LockRequest{OrderNo: "ORDER", UserID: 7, OrderAmount: orderAmount})
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || locks[i] != locks[0] {
			t.Fatalf("call %d: %+v, %v; want the same lock as call 0, %+v", i, locks[i], errs[i], locks[0])
		}
	}
	got := f.lockRow(t, c.ID)
	if got.Status != coupon.StatusLocked || got.LockedOrderNo != "ORDER" || !got.LockedUntil.Equal(locks[0].LockedUntil) || got.Version != 1 {
		t.Fatalf("coupon = %+v, want LOCKED once by ORDER until %s", got, locks[0].LockedUntil)
	}
	if locked, same := f.metric(t, "coupon_lock_requests_total", "locked"), f.metric(t, "coupon_lock_requests_total", "same_lock"); locked != 1 || same != n-1 {
		t.Fatalf("locked %v, same_lock %v; want 1 and %d", locked, same, n-1)
	}
}

// TestARetryAfterALostCommitAckGetsTheSameLock loses the acknowledgement of
// the lock's COMMIT (pkg/lab/fault): the order service sees an error
// although the lock committed, and its retry must get that lock back, with
// the same deadline, rather than a second lock or a refusal.
func TestARetryAfterALostCommitAckGetsTheSameLock(t *testing.T) {
	cfg := testenv.Config(t)
	driverName := testenv.UniqueName(t, "fault")
	inj, err := fault.Register(driverName)
	testenv.Must(t, err)
	env := lab.Env{MySQL: cfg.MySQL, Log: testenv.Logger(t), Prefix: testenv.UniqueName(t, "lock")}
	env.MySQL.DriverName = driverName
	db, drop, err := env.OpenDB(context.Background(), "lostack", migrations.Source, outbox.Migrations)
	testenv.Must(t, err)
	t.Cleanup(drop)
	f := newFixtureWith(t, db, coupontest.Settings(t, nil), assembly.Options{})
	c := f.issue(t, 7)

	// The clock moves between the attempts, so a second lock would carry
	// another deadline.
	now := time.Now().UTC()
	f.setClock(func() time.Time { return now })
	req := coupon.LockRequest{OrderNo: "ORDER", UserID: 7, OrderAmount: orderAmount}
	// The lock is one statement that commits by itself; its reply is lost.
	inj.LoseCommitAcksMatching(1, "UPDATE coupons")
	_, first := f.app.LockCoupon(ctx, c.ID, req)
	inj.Disarm()
	if first == nil || inj.Stats().CommitAcksLost != 1 {
		t.Fatalf("first attempt: err %v, %d acks lost; want the lost acknowledgement's error", first, inj.Stats().CommitAcksLost)
	}
	committed := f.lockRow(t, c.ID)
	if committed.Status != coupon.StatusLocked || committed.LockedOrderNo != "ORDER" {
		t.Fatalf("after the lost ack the coupon is %+v, want the lock committed", committed)
	}
	now = now.Add(time.Minute)
	l, err := f.app.LockCoupon(ctx, c.ID, req)
	if err != nil || l.OrderNo != "ORDER" || !l.LockedUntil.Equal(committed.LockedUntil) {
		t.Fatalf("retry: %+v, %v; want the committed lock until %s", l, err, committed.LockedUntil)
	}
	if got := f.lockRow(t, c.ID); got.Version != 1 {
		t.Fatalf("coupon version %d, want 1: locked once", got.Version)
	}
}

// TestReleaseOnlyTheHoldersLockOnce: a release by another order, a second
// release, and a release of a used coupon all answer false and change
// nothing; the holder's first release frees the coupon for another order.
func TestReleaseOnlyTheHoldersLockOnce(t *testing.T) {
	f := newFixture(t, variant.Fixed)
	c := f.issue(t, 7)
	f.lock(t, c.ID, "HOLDER", 7)
	release := func(couponID uint64, order string) bool {
		ok, err := f.app.ReleaseLock(ctx, couponID, order, "")
		testenv.Must(t, err)
		return ok
	}
	if release(c.ID, "OTHER") || release(c.ID+1000, "HOLDER") {
		t.Fatal("a release by an order that does not hold the lock, or of an unknown coupon, released")
	}
	if !release(c.ID, "HOLDER") {
		t.Fatal("the holder's release did not release")
	}
	if release(c.ID, "HOLDER") {
		t.Fatal("a second release released again")
	}
	if got := f.lockRow(t, c.ID); got.Status != coupon.StatusUnused || got.LockedOrderNo != "" {
		t.Fatalf("released coupon = %+v", got)
	}
	f.lock(t, c.ID, "NEXT", 7)
	if release(c.ID, "HOLDER") {
		t.Fatal("the first holder's late release freed the next order's lock")
	}
	if v := f.metric(t, "coupon_lock_releases_total", "release_call"); v != 1 {
		t.Fatalf("coupon_lock_releases_total{by=release_call} = %v, want 1", v)
	}
	if _, err := f.app.ReleaseLock(ctx, c.ID, "", ""); !errors.Is(err, coupon.ErrInvalid) {
		t.Fatalf("release without an order number: %v, want ErrInvalid", err)
	}
}

// TestConcurrentReleasesReleaseOnce: many releases of one lock at once (the
// order service's retries, the cancel event, the sweeper) release it once.
func TestConcurrentReleasesReleaseOnce(t *testing.T) {
	f := newFixture(t, variant.Fixed)
	c := f.issue(t, 7)
	f.lock(t, c.ID, "HOLDER", 7)
	const n = 30
	var wg sync.WaitGroup
	var mu sync.Mutex
	released := 0
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			ok, err := f.app.ReleaseLock(ctx, c.ID, "HOLDER", "")
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				released++
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if got := f.lockRow(t, c.ID); released != 1 || got.Version != 2 {
		t.Fatalf("%d releases answered true, coupon version %d; want 1 and 2 (lock, release)", released, got.Version)
	}
}
