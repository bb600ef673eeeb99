package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
	"github.com/oncemall/oncemall/services/coupon/internal/store"
	labmigrations "github.com/oncemall/oncemall/services/coupon/lab/migrations"
	"github.com/oncemall/oncemall/services/coupon/migrations"
)

func newStore(t *testing.T) *store.Store {
	t.Helper()
	return store.New(testenv.DB(t, migrations.Source, outbox.Migrations))
}

// newIncidentStore is a store on the incident's schema (the lab's
// migration), whose ledger takes a second row for an order.
func newIncidentStore(t *testing.T) *store.Store {
	t.Helper()
	return store.New(testenv.DB(t, migrations.Source, outbox.Migrations, labmigrations.Source))
}

var ctx = context.Background()

func issue(t *testing.T, s *store.Store, userID uint64) coupon.Coupon {
	t.Helper()
	tpl := coupon.Template{Name: "10 off", DiscountAmount: 1000, ValidDays: 30, CreatedAt: time.Now().UTC()}
	testenv.Must(t, s.CreateTemplate(ctx, &tpl))
	c, err := coupon.Issue(tpl, userID, time.Now().UTC())
	testenv.Must(t, err)
	testenv.Must(t, s.CreateCoupon(ctx, &c))
	return c
}

func land(t *testing.T, s *store.Store, messageID, orderNo string, couponID uint64, due time.Time) coupon.Message {
	t.Helper()
	m, err := coupon.NewMessage(messageID, orderNo, 1, couponID, due)
	testenv.Must(t, err)
	testenv.Must(t, s.InTx(ctx, func(tx coupon.Tx) error {
		ok, err := tx.InsertMessage(ctx, &m)
		if err == nil && !ok {
			err = errors.New("not inserted")
		}
		return err
	}))
	return m
}

func TestCouponRoundTripAndNotFound(t *testing.T) {
	s := newStore(t)
	c := issue(t, s, 1)
	got, err := s.Coupon(ctx, c.ID)
	if err != nil || got.Status != coupon.StatusUnused || got.UserID != 1 || got.UsedOrderNo != "" || got.LockedOrderNo != "" ||
		!got.LockedUntil.IsZero() || got.ExpiresAt.Sub(got.CreatedAt) != 30*24*time.Hour {
		t.Fatalf("Coupon = %+v, %v", got, err)
	}
	if _, err := s.Coupon(ctx, c.ID+100); !errors.Is(err, coupon.ErrNotFound) {
		t.Fatalf("missing coupon: err = %v, want ErrNotFound", err)
	}
	list, err := s.UserCoupons(ctx, 1)
	if err != nil || len(list) != 1 || list[0].ID != c.ID {
		t.Fatalf("UserCoupons = %+v, %v", list, err)
	}
}

func TestInsertMessageIsUniquePerMessageID(t *testing.T) {
	s := newStore(t)
	land(t, s, "m1", "o1", 1, time.Now().UTC())
	m, _ := coupon.NewMessage("m1", "o1", 1, 1, time.Now().UTC())
	testenv.Must(t, s.InTx(ctx, func(tx coupon.Tx) error {
		ok, err := tx.InsertMessage(ctx, &m)
		if ok {
			return errors.New("a second row for the same message id")
		}
		return err
	}))
}

// TestClaimDueMessagesHandsEachMessageToOneClaimer races claimers as several
// replicas' retry jobs would: every due message is claimed exactly once.
func TestClaimDueMessagesHandsEachMessageToOneClaimer(t *testing.T) {
	s := newStore(t)
	now := time.Now().UTC()
	const total = 60
	for i := range total {
		land(t, s, fmt.Sprintf("m%d", i), fmt.Sprintf("o%d", i), 1, now.Add(-time.Second))
	}
	var mu sync.Mutex
	seen := map[uint64]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				ms, err := s.ClaimDueMessages(ctx, now, 7, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if len(ms) == 0 {
					return
				}
				mu.Lock()
				for _, m := range ms {
					seen[m.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != total {
		t.Fatalf("claimed %d distinct messages, want %d", len(seen), total)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("message %d claimed %d times", id, n)
		}
	}
	// The lease hides them until it ends.
	if ms, _ := s.ClaimDueMessages(ctx, now.Add(30*time.Second), 100, time.Minute); len(ms) != 0 {
		t.Fatalf("%d messages claimed again within the lease", len(ms))
	}
	if ms, _ := s.ClaimDueMessages(ctx, now.Add(2*time.Minute), 100, time.Minute); len(ms) != total {
		t.Fatalf("%d messages claimable after the lease, want %d", len(ms), total)
	}
}

func TestClaimSkipsMessagesNotDueOrSettled(t *testing.T) {
	s := newStore(t)
	now := time.Now().UTC()
	land(t, s, "later", "o1", 1, now.Add(time.Hour))
	done := land(t, s, "done", "o2", 1, now.Add(-time.Second))
	ok, err := s.MarkMessage(ctx, done.ID, coupon.MessageSuccess, 0, now, "", "", now)
	if err != nil || !ok {
		t.Fatalf("MarkMessage = %v, %v", ok, err)
	}
	if ms, err := s.ClaimDueMessages(ctx, now, 10, time.Minute); err != nil || len(ms) != 0 {
		t.Fatalf("claimed %+v, %v; want nothing", ms, err)
	}
}

func TestMarkMessageOnlyMovesPending(t *testing.T) {
	s := newStore(t)
	now := time.Now().UTC()
	m := land(t, s, "m1", "o1", 1, now)
	if ok, err := s.MarkMessage(ctx, m.ID, coupon.MessageFailed, 1, now, "gave up", "max_retries", now); err != nil || !ok {
		t.Fatalf("first mark = %v, %v", ok, err)
	}
	if ok, err := s.MarkMessage(ctx, m.ID, coupon.MessageSuccess, 2, now, "", "", now); err != nil || ok {
		t.Fatalf("second mark = %v, %v; want false: a FAILED message is settled", ok, err)
	}
	got, _ := s.Message(ctx, m.ID)
	var reason string
	testenv.Must(t, s.DB().Table("coupon_message").Where("id = ?", m.ID).Pluck("failure_reason", &reason).Error)
	if got.Status != coupon.MessageFailed || got.LastError != "gave up" || got.RetryCount != 1 || reason != "max_retries" {
		t.Fatalf("message = %+v, failure_reason %q", got, reason)
	}
}

// TestDeductionIsUniquePerOrder proves the last line of the fix: the
// service's schema refuses a second ledger row for an order, inside the
// transaction that tries it, while the incident's schema (the lab's) takes
// it, so the lab's broken deduction reproduces the incident.
func TestDeductionIsUniquePerOrder(t *testing.T) {
	now := time.Now().UTC()
	insert := func(s *store.Store, orderNo string) error {
		return s.InTx(ctx, func(tx coupon.Tx) error {
			d := coupon.Deduction{OrderNo: orderNo, CouponID: 1, UserID: 1, Amount: 100, MessageID: "m", CreatedAt: now}
			return tx.InsertDeduction(ctx, &d)
		})
	}
	s := newStore(t)
	testenv.Must(t, insert(s, "O1"))
	if err := insert(s, "O1"); !errors.Is(err, coupon.ErrOrderAlreadyDeducted) {
		t.Fatalf("second row for the order: err = %v, want ErrOrderAlreadyDeducted", err)
	}
	testenv.Must(t, insert(s, "O2"))

	incident := newIncidentStore(t)
	testenv.Must(t, insert(incident, "O1"))
	testenv.Must(t, insert(incident, "O1"))
	var n int64
	testenv.Must(t, incident.DB().Table("coupon_deduction").Where("order_no = ?", "O1").Count(&n).Error)
	if n != 2 {
		t.Fatalf("the incident's schema holds %d rows for the order, want 2", n)
	}
}

// TestDeductionOfACouponTakesItsOwnerAndDiscount: InsertDeductionOf
// writes the ledger row of an order with the coupon's owner and its
// template's discount, refuses a second row for the order as
// InsertDeduction does, and a coupon that does not exist with ErrNotFound.
func TestDeductionOfACouponTakesItsOwnerAndDiscount(t *testing.T) {
	s := newStore(t)
	c := issue(t, s, 42)
	now := time.Now().UTC()
	insert := func(couponID uint64, orderNo string) error {
		return s.InTx(ctx, func(tx coupon.Tx) error { return tx.InsertDeductionOf(ctx, couponID, orderNo, "m-"+orderNo, now) })
	}
	testenv.Must(t, insert(c.ID, "O1"))
	var n int64
	testenv.Must(t, s.DB().Table("coupon_deduction").Where("order_no = ? AND coupon_id = ? AND user_id = ? AND amount = ? AND message_id = ?",
		"O1", c.ID, 42, 1000, "m-O1").Count(&n).Error)
	if n != 1 {
		t.Fatalf("%d ledger rows of O1 with the owner and the discount, want 1", n)
	}
	if err := insert(c.ID, "O1"); !errors.Is(err, coupon.ErrOrderAlreadyDeducted) {
		t.Fatalf("second row for the order: err = %v, want ErrOrderAlreadyDeducted", err)
	}
	if err := insert(c.ID+1000, "O2"); !errors.Is(err, coupon.ErrNotFound) {
		t.Fatalf("row of a coupon that does not exist: err = %v, want ErrNotFound", err)
	}
}

// inTx runs one Tx call in its own transaction and returns its rows
// affected.
func inTx(t *testing.T, s *store.Store, fn func(tx coupon.Tx) (int64, error)) int64 {
	t.Helper()
	var n int64
	testenv.Must(t, s.InTx(ctx, func(tx coupon.Tx) error {
		var err error
		n, err = fn(tx)
		return err
	}))
	return n
}

// TestLockReleaseAndUseAreConditional walks the state machine's conditional
// updates: each moves the coupon once, only from its state and only for the
// order that holds the lock, and says so in its rows affected.
func TestLockReleaseAndUseAreConditional(t *testing.T) {
	s := newStore(t)
	c := issue(t, s, 1)
	now := time.Now().UTC()
	until := now.Add(45 * time.Minute).Truncate(time.Millisecond)
	lock := func(order string) int64 {
		return inTx(t, s, func(tx coupon.Tx) (int64, error) { return tx.LockCoupon(ctx, c.ID, order, until, now) })
	}
	release := func(order string) int64 {
		return inTx(t, s, func(tx coupon.Tx) (int64, error) { return tx.ReleaseLock(ctx, c.ID, order, now) })
	}
	useBy := func(order string, user uint64) int64 {
		return inTx(t, s, func(tx coupon.Tx) (int64, error) { return tx.UseLockedCoupon(ctx, c.ID, order, user, now) })
	}
	use := func(order string) int64 { return useBy(order, c.UserID) }
	steps := []struct {
		what string
		do   func() int64
		want int64
	}{
		{"use an UNUSED coupon", func() int64 { return use("o1") }, 0},
		{"release an UNUSED coupon", func() int64 { return release("o1") }, 0},
		{"lock for o1", func() int64 { return lock("o1") }, 1},
		{"lock again for o1", func() int64 { return lock("o1") }, 0},
		{"lock for o2 while o1 holds it", func() int64 { return lock("o2") }, 0},
		{"release by o2, which does not hold it", func() int64 { return release("o2") }, 0},
		{"use for o2, which does not hold it", func() int64 { return use("o2") }, 0},
		{"release by o1", func() int64 { return release("o1") }, 1},
		{"release by o1 again", func() int64 { return release("o1") }, 0},
		{"lock for o2", func() int64 { return lock("o2") }, 1},
		{"use for o2 as another user's coupon", func() int64 { return useBy("o2", c.UserID+1) }, 0},
		{"use for o2", func() int64 { return use("o2") }, 1},
		{"use for o2 again", func() int64 { return use("o2") }, 0},
		{"release a USED coupon", func() int64 { return release("o2") }, 0},
	}
	for _, st := range steps {
		if got := st.do(); got != st.want {
			t.Fatalf("%s: %d rows, want %d", st.what, got, st.want)
		}
	}
	got, _ := s.Coupon(ctx, c.ID)
	if got.Status != coupon.StatusUsed || got.UsedOrderNo != "o2" || got.LockedOrderNo != "o2" || !got.LockedUntil.Equal(until) || got.Version != 4 {
		t.Fatalf("coupon = %+v; want USED by o2, its lock kept as the record, version 4 (lock, release, lock, use)", got)
	}
}

// TestReleasedLockClearsItsOrderAndDeadline: a released coupon is UNUSED
// with nothing left of the lock, so another order can take it.
func TestReleasedLockClearsItsOrderAndDeadline(t *testing.T) {
	s := newStore(t)
	c := issue(t, s, 1)
	now := time.Now().UTC()
	inTx(t, s, func(tx coupon.Tx) (int64, error) { return tx.LockCoupon(ctx, c.ID, "o1", now.Add(time.Hour), now) })
	inTx(t, s, func(tx coupon.Tx) (int64, error) { return tx.ReleaseLock(ctx, c.ID, "o1", now) })
	got, _ := s.Coupon(ctx, c.ID)
	if got.Status != coupon.StatusUnused || got.LockedOrderNo != "" || !got.LockedUntil.IsZero() {
		t.Fatalf("released coupon = %+v", got)
	}
}

// TestAnOrderLocksOneCouponAtMost: the unique key on locked_order_no
// refuses a second coupon for the same order inside the transaction, as
// not available, and leaves the second coupon UNUSED.
func TestAnOrderLocksOneCouponAtMost(t *testing.T) {
	s := newStore(t)
	first, second := issue(t, s, 1), issue(t, s, 1)
	now := time.Now().UTC()
	inTx(t, s, func(tx coupon.Tx) (int64, error) { return tx.LockCoupon(ctx, first.ID, "o1", now.Add(time.Hour), now) })
	err := s.InTx(ctx, func(tx coupon.Tx) error {
		_, err := tx.LockCoupon(ctx, second.ID, "o1", now.Add(time.Hour), now)
		return err
	})
	if !errors.Is(err, coupon.ErrNotAvailable) {
		t.Fatalf("a second coupon for o1: err = %v, want ErrNotAvailable", err)
	}
	if got, _ := s.Coupon(ctx, second.ID); got.Status != coupon.StatusUnused {
		t.Fatalf("second coupon = %+v, want UNUSED", got)
	}
}

// TestOverdueLocksPagesThroughLocksPastTheirDeadline: only LOCKED coupons
// whose deadline has passed are listed, in id order, a page after another.
func TestOverdueLocksPagesThroughLocksPastTheirDeadline(t *testing.T) {
	s := newStore(t)
	now := time.Now().UTC()
	var overdue []uint64
	for i := range 7 {
		c := issue(t, s, 1)
		until := now.Add(-time.Minute)
		switch i {
		case 2:
			until = now.Add(time.Minute) // not yet due
		case 4:
			// UNUSED: never locked.
			continue
		default:
			overdue = append(overdue, c.ID)
		}
		inTx(t, s, func(tx coupon.Tx) (int64, error) { return tx.LockCoupon(ctx, c.ID, fmt.Sprintf("o%d", i), until, now) })
	}
	used := overdue[len(overdue)-1]
	overdue = overdue[:len(overdue)-1]
	inTx(t, s, func(tx coupon.Tx) (int64, error) { return tx.UseLockedCoupon(ctx, used, "o6", 1, now) })

	var got []uint64
	var after uint64
	for {
		page, err := s.OverdueLocks(ctx, now, after, 2)
		testenv.Must(t, err)
		for _, c := range page {
			got = append(got, c.ID)
			after = c.ID
		}
		if len(page) < 2 {
			break
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(overdue) {
		t.Fatalf("overdue locks %v, want %v", got, overdue)
	}
}

func TestReconcileFindsEachAnomaly(t *testing.T) {
	// The incident's schema: the duplicate deduction below is what the
	// reconciler exists to find, and the service's schema would refuse it.
	s := newIncidentStore(t)
	now := time.Now().UTC()
	overdueBefore := now.Add(-30 * time.Minute)
	as, err := s.Reconcile(ctx, overdueBefore)
	if err != nil || as == nil || len(as) != 0 {
		t.Fatalf("clean database: %+v, %v; want an empty, non-nil list", as, err)
	}
	twice := issue(t, s, 1)     // used, deducted twice
	noLedger := issue(t, s, 1)  // used, never deducted
	unusedRow := issue(t, s, 1) // unused, with a ledger row
	clean := issue(t, s, 1)     // used, deducted once
	stuck := issue(t, s, 1)     // locked, an hour past its deadline
	late := issue(t, s, 1)      // locked, a minute past its deadline: the sweeper's, not stuck yet
	stuckUntil := now.Add(-time.Hour).Truncate(time.Millisecond)
	testenv.Must(t, s.InTx(ctx, func(tx coupon.Tx) error {
		for _, u := range []struct {
			id    uint64
			order string
		}{{twice.ID, "TWICE"}, {noLedger.ID, "NOLEDGER"}, {clean.ID, "CLEAN"}} {
			if _, err := tx.LockCoupon(ctx, u.id, u.order, now.Add(time.Hour), now); err != nil {
				return err
			}
			if _, err := tx.UseLockedCoupon(ctx, u.id, u.order, 1, now); err != nil {
				return err
			}
		}
		if _, err := tx.LockCoupon(ctx, stuck.ID, "STUCK", stuckUntil, now); err != nil {
			return err
		}
		if _, err := tx.LockCoupon(ctx, late.ID, "LATE", now.Add(-time.Minute), now); err != nil {
			return err
		}
		for _, d := range []coupon.Deduction{
			{OrderNo: "TWICE", CouponID: twice.ID}, {OrderNo: "TWICE", CouponID: twice.ID},
			{OrderNo: "UNUSED", CouponID: unusedRow.ID}, {OrderNo: "CLEAN", CouponID: clean.ID},
		} {
			d.UserID, d.Amount, d.MessageID, d.CreatedAt = 1, 100, "m", now
			if err := tx.InsertDeduction(ctx, &d); err != nil {
				return err
			}
		}
		return nil
	}))
	// Three failed messages: a paid order whose coupon it did not hold, one
	// whose coupon another order used, and one that only ran out of
	// retries (a transient trouble, not a paid order without its lock).
	for _, f := range []struct{ order, reason string }{{"UNHELD", "not_locked_by_order"}, {"RIVAL", "used_by_another_order"}, {"FLAKY", "max_retries"}} {
		m := land(t, s, "m-"+f.order, f.order, clean.ID, now)
		if ok, err := s.MarkMessage(ctx, m.ID, coupon.MessageFailed, 1, now, "refused", f.reason, now); err != nil || !ok {
			t.Fatalf("mark %s: %v, %v", f.order, ok, err)
		}
	}
	as, err = s.Reconcile(ctx, overdueBefore)
	testenv.Must(t, err)
	want := []coupon.Anomaly{
		{Kind: coupon.AnomalyDuplicateDeduction, OrderNo: "TWICE", Count: 2},
		{Kind: coupon.AnomalyUsedWithoutLedger, CouponID: noLedger.ID, OrderNo: "NOLEDGER"},
		{Kind: coupon.AnomalyLedgerOnUnused, OrderNo: "UNUSED", CouponID: unusedRow.ID, Count: 1},
		{Kind: coupon.AnomalyPaidWithoutLock, OrderNo: "UNHELD", CouponID: clean.ID, Reason: "not_locked_by_order"},
		{Kind: coupon.AnomalyPaidWithoutLock, OrderNo: "RIVAL", CouponID: clean.ID, Reason: "used_by_another_order"},
		{Kind: coupon.AnomalyLockOverdue, OrderNo: "STUCK", CouponID: stuck.ID, LockedUntil: stuckUntil},
	}
	if fmt.Sprint(as) != fmt.Sprint(want) {
		t.Fatalf("anomalies:\n got %+v\nwant %+v", as, want)
	}
}
