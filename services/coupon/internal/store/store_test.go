package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
	"github.com/oncemall/oncemall/services/coupon/internal/store"
	labmigrations "github.com/oncemall/oncemall/services/coupon/lab/migrations"
	"github.com/oncemall/oncemall/services/coupon/migrations"
)

func newStore(t *testing.T) *store.Store {
	t.Helper()
	return store.New(testenv.DB(t, migrations.Source, outbox.Migrations), func() {})
}

// newIncidentStore is a store on the incident's schema (the lab's
// migration), whose ledger takes a second row for an order.
func newIncidentStore(t *testing.T) *store.Store {
	t.Helper()
	return store.New(testenv.DB(t, migrations.Source, outbox.Migrations, labmigrations.Source), func() {})
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

// TestAddEventWakesTheRelayAfterTheCommitOnly: an event is an outbox row
// under its own id, subject and JSON payload, and the relay is woken once
// the transaction that added it has committed, never for a rollback or a
// transaction without events.
func TestAddEventWakesTheRelayAfterTheCommitOnly(t *testing.T) {
	db := testenv.DB(t, migrations.Source, outbox.Migrations)
	wakes := 0
	s := store.New(db, func() { wakes++ })
	add := func(id string, fail error) error {
		return s.InTx(ctx, func(tx coupon.Tx) error {
			if err := tx.AddEvent(ctx, events.Event{ID: id, Subject: events.CouponUsed, Payload: events.CouponUsedV1{OrderNo: id}}); err != nil {
				return err
			}
			return fail
		})
	}
	testenv.Must(t, add("e1", nil))
	if wakes != 1 {
		t.Fatalf("%d wakes after one commit with an event, want 1", wakes)
	}
	if err := add("e2", errors.New("rolled back")); err == nil || wakes != 1 {
		t.Fatalf("rollback: err %v, %d wakes; want the error and no wake", err, wakes)
	}
	testenv.Must(t, s.InTx(ctx, func(coupon.Tx) error { return nil }))
	if wakes != 1 {
		t.Fatalf("%d wakes after a transaction without events, want 1", wakes)
	}
	var rows []struct {
		MessageNo string
		Topic     string
		Body      string
	}
	testenv.Must(t, db.Table("local_message").Select("message_no, topic, body").Scan(&rows).Error)
	if len(rows) != 1 || rows[0].MessageNo != "e1" || rows[0].Topic != events.CouponUsed || !strings.Contains(rows[0].Body, `"order_no":"e1"`) {
		t.Fatalf("outbox rows %+v, want e1 on %s with its JSON payload", rows, events.CouponUsed)
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
	// The incident's schema: the duplicate deduction below is what the
	// reconciler exists to find, and the service's schema would refuse it.
	s := newIncidentStore(t)
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
			d.UserID, d.Amount, d.MessageID, d.CreatedAt = 1, 100, "m", now
			if err := tx.InsertDeduction(ctx, &d); err != nil {
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
