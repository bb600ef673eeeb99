package store_test

import (
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
	"github.com/oncemall/oncemall/services/coupon/internal/store"
	"github.com/oncemall/oncemall/services/coupon/migrations"
)

// TestStateUpdatesReadByKey: every move of a coupon or of a coupon message
// finds its row by its primary key. MariaDB's own plan can read
// idx_coupons_lock_deadline or idx_coupon_message_due instead (both start
// with status; it did for a three-coupon table with fresh statistics),
// locking entries and gaps that other coupons and messages moving beside it
// need; see database.ByKey. MariaDB is asked for
// the plan of each statement the store really sent.
func TestStateUpdatesReadByKey(t *testing.T) {
	db := testenv.DB(t, migrations.Source, outbox.Migrations)
	s := store.New(db)
	a, b := issue(t, s, 1), issue(t, s, 1)
	now := time.Now().UTC()
	m := land(t, s, "m-1", "O-2", b.ID, now)
	land(t, s, "m-2", "O-3", b.ID, now.Add(time.Hour))

	rdb, rec := testenv.RecordSQL(db)
	rs := store.New(rdb)
	moved := func(n int64, err error) {
		t.Helper()
		testenv.Must(t, err)
		if n != 1 {
			t.Fatalf("a move changed %d rows, want 1", n)
		}
	}
	testenv.Must(t, rs.InTx(ctx, func(tx coupon.Tx) error {
		moved(tx.LockCoupon(ctx, a.ID, "O-1", now.Add(time.Minute), now))
		moved(tx.ReleaseLock(ctx, a.ID, "O-1", now))
		moved(tx.LockCoupon(ctx, b.ID, "O-2", now.Add(time.Minute), now))
		moved(tx.UseLockedCoupon(ctx, b.ID, "O-2", b.UserID, now))
		return nil
	}))
	claimed, err := rs.ClaimDueMessages(ctx, now, 10, time.Minute)
	testenv.Must(t, err)
	if len(claimed) != 1 || claimed[0].ID != m.ID {
		t.Fatalf("claimed %+v, want message %d", claimed, m.ID)
	}
	testenv.Must(t, rs.InTx(ctx, func(tx coupon.Tx) error {
		moved(tx.SettleMessage(ctx, m.ID, now))
		return nil
	}))
	ok, err := rs.MarkMessage(ctx, m.ID, coupon.MessageFailed, 1, now, "x", "", now)
	testenv.Must(t, err)
	if ok {
		t.Fatal("a settled message was marked again")
	}
	testenv.RequireKeyed(t, db, rec.Take("UPDATE"), 7)
}
