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
	"github.com/oncemall/oncemall/services/coupon/migrations"
)

func newStore(t *testing.T) *store.Store {
	t.Helper()
	return store.New(testenv.DB(t, migrations.Source, outbox.Migrations))
}

var ctx = context.Background()

func issue(t *testing.T, s *store.Store, userID uint64) coupon.Coupon {
	t.Helper()
	tpl := coupon.Template{Name: "10 off", DiscountAmount: 1000, CreatedAt: time.Now().UTC()}
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
	if err != nil || got.Status != coupon.StatusUnused || got.UserID != 1 || got.UsedOrderNo != "" {
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
	ok, err := s.MarkMessage(ctx, done.ID, coupon.MessageSuccess, 0, now, "", now)
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
	if ok, err := s.MarkMessage(ctx, m.ID, coupon.MessageFailed, 1, now, "gave up", now); err != nil || !ok {
		t.Fatalf("first mark = %v, %v", ok, err)
	}
	if ok, err := s.MarkMessage(ctx, m.ID, coupon.MessageSuccess, 2, now, "", now); err != nil || ok {
		t.Fatalf("second mark = %v, %v; want false: a FAILED message is settled", ok, err)
	}
	got, _ := s.Message(ctx, m.ID)
	if got.Status != coupon.MessageFailed || got.LastError != "gave up" || got.RetryCount != 1 {
		t.Fatalf("message = %+v", got)
	}
}

// TestDeductionGuardOnlyBindsTheFixedPath proves the schema choice of
// migration 000002: guarded rows are unique per order, unguarded rows (the
// broken path) are not, so the shared schema keeps the broken path broken.
func TestDeductionGuardOnlyBindsTheFixedPath(t *testing.T) {
	s := newStore(t)
	now := time.Now().UTC()
	insert := func(orderNo string, guarded bool) error {
		return s.InTx(ctx, func(tx coupon.Tx) error {
			d := coupon.Deduction{OrderNo: orderNo, CouponID: 1, UserID: 1, Amount: 100, MessageID: "m", Mode: coupon.ModeFixed, CreatedAt: now}
			return tx.InsertDeduction(ctx, &d, guarded)
		})
	}
	testenv.Must(t, insert("guarded", true))
	if err := insert("guarded", true); !errors.Is(err, coupon.ErrOrderAlreadyDeducted) {
		t.Fatalf("second guarded row: err = %v, want ErrOrderAlreadyDeducted", err)
	}
	testenv.Must(t, insert("unguarded", false))
	testenv.Must(t, insert("unguarded", false))
	var n int64
	testenv.Must(t, s.DB().Table("coupon_deduction").Where("order_no = ?", "unguarded").Count(&n).Error)
	if n != 2 {
		t.Fatalf("%d unguarded rows, want 2", n)
	}
}

func TestUseCouponIfUnusedAffectsOneRowOnce(t *testing.T) {
	s := newStore(t)
	c := issue(t, s, 1)
	now := time.Now().UTC()
	for i, want := range []int64{1, 0} {
		var n int64
		testenv.Must(t, s.InTx(ctx, func(tx coupon.Tx) error {
			var err error
			n, err = tx.UseCouponIfUnused(ctx, c.ID, "o1", now)
			return err
		}))
		if n != want {
			t.Fatalf("update %d affected %d rows, want %d", i+1, n, want)
		}
	}
	got, _ := s.Coupon(ctx, c.ID)
	if got.Status != coupon.StatusUsed || got.UsedOrderNo != "o1" || got.Version != 1 {
		t.Fatalf("coupon = %+v", got)
	}
}

func TestIdempotentRecordInsertedOnce(t *testing.T) {
	s := newStore(t)
	now := time.Now().UTC()
	rec := coupon.IdempotentRecord{Key: coupon.NoticeKey("o1"), BizType: coupon.BizCouponUsedNotice, BizNo: "o1", CreatedAt: now, ExpireTime: now.Add(time.Hour)}
	for i, want := range []bool{true, false} {
		var got bool
		testenv.Must(t, s.InTx(ctx, func(tx coupon.Tx) error {
			var err error
			got, err = tx.InsertIdempotentRecord(ctx, rec)
			return err
		}))
		if got != want {
			t.Fatalf("insert %d = %v, want %v", i+1, got, want)
		}
	}
}

func TestArchiveMovesOnlyExpiredRecords(t *testing.T) {
	s := newStore(t)
	now := time.Now().UTC()
	for i := range 7 {
		expire := now.Add(-time.Hour) // expired
		if i >= 5 {
			expire = now.Add(time.Hour) // still online
		}
		testenv.Must(t, s.InTx(ctx, func(tx coupon.Tx) error {
			_, err := tx.InsertIdempotentRecord(ctx, coupon.IdempotentRecord{Key: fmt.Sprintf("k%d", i), BizType: 1, BizNo: "o", CreatedAt: now, ExpireTime: expire})
			return err
		}))
	}
	total := 0
	for {
		n, err := s.ArchiveIdempotentRecords(ctx, now, 2)
		testenv.Must(t, err)
		total += n
		if n < 2 {
			break
		}
	}
	var online, archived int64
	testenv.Must(t, s.DB().Table("biz_idempotent_record").Count(&online).Error)
	testenv.Must(t, s.DB().Table("biz_idempotent_record_archive").Count(&archived).Error)
	if total != 5 || online != 2 || archived != 5 {
		t.Fatalf("moved %d, online %d, archived %d; want 5, 2, 5", total, online, archived)
	}
}

func TestReconcileFindsEachAnomaly(t *testing.T) {
	s := newStore(t)
	as, err := s.Reconcile(ctx)
	if err != nil || as == nil || len(as) != 0 {
		t.Fatalf("clean database: %+v, %v; want an empty, non-nil list", as, err)
	}
	now := time.Now().UTC()
	twice := issue(t, s, 1)     // used, deducted twice
	noLedger := issue(t, s, 1)  // used, never deducted
	unusedRow := issue(t, s, 1) // unused, with a ledger row
	clean := issue(t, s, 1)     // used, deducted once
	testenv.Must(t, s.InTx(ctx, func(tx coupon.Tx) error {
		for _, u := range []struct {
			id    uint64
			order string
		}{{twice.ID, "TWICE"}, {noLedger.ID, "NOLEDGER"}, {clean.ID, "CLEAN"}} {
			if _, err := tx.UseCouponIfUnused(ctx, u.id, u.order, now); err != nil {
				return err
			}
		}
		for _, d := range []coupon.Deduction{
			{OrderNo: "TWICE", CouponID: twice.ID}, {OrderNo: "TWICE", CouponID: twice.ID},
			{OrderNo: "UNUSED", CouponID: unusedRow.ID}, {OrderNo: "CLEAN", CouponID: clean.ID},
		} {
			d.UserID, d.Amount, d.MessageID, d.Mode, d.CreatedAt = 1, 100, "m", coupon.ModeBroken, now
			if err := tx.InsertDeduction(ctx, &d, false); err != nil {
				return err
			}
		}
		return nil
	}))
	as, err = s.Reconcile(ctx)
	testenv.Must(t, err)
	want := []coupon.Anomaly{
		{Kind: coupon.AnomalyDuplicateDeduction, OrderNo: "TWICE", Count: 2},
		{Kind: coupon.AnomalyUsedWithoutLedger, CouponID: noLedger.ID, OrderNo: "NOLEDGER"},
		{Kind: coupon.AnomalyLedgerOnUnused, OrderNo: "UNUSED", CouponID: unusedRow.ID, Count: 1},
	}
	if fmt.Sprint(as) != fmt.Sprint(want) {
		t.Fatalf("anomalies:\n got %+v\nwant %+v", as, want)
	}
}

// TestConcurrentArchiversMoveEachRecordOnce races archivers as several
// replicas' jobs would (without the Redis lock): every expired record ends in
// the archive exactly once, and no archiver fails.
func TestConcurrentArchiversMoveEachRecordOnce(t *testing.T) {
	s := newStore(t)
	now := time.Now().UTC()
	const total = 120
	testenv.Must(t, s.InTx(ctx, func(tx coupon.Tx) error {
		for i := range total {
			if _, err := tx.InsertIdempotentRecord(ctx, coupon.IdempotentRecord{Key: fmt.Sprintf("k%d", i), BizType: 1, BizNo: "o",
				CreatedAt: now, ExpireTime: now.Add(-time.Minute)}); err != nil {
				return err
			}
		}
		return nil
	}))
	var wg sync.WaitGroup
	var mu sync.Mutex
	moved := 0
	for range 6 {
		wg.Go(func() {
			for {
				n, err := s.ArchiveIdempotentRecords(ctx, now, 7)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				moved += n
				mu.Unlock()
				if n == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	var online, archived, distinct int64
	testenv.Must(t, s.DB().Table("biz_idempotent_record").Count(&online).Error)
	testenv.Must(t, s.DB().Table("biz_idempotent_record_archive").Count(&archived).Error)
	testenv.Must(t, s.DB().Table("biz_idempotent_record_archive").Distinct("idempotent_key").Count(&distinct).Error)
	if moved != total || online != 0 || archived != total || distinct != total {
		t.Fatalf("moved %d, online %d, archived %d (%d distinct); want %d moved and archived once", moved, online, archived, distinct, total)
	}
}
