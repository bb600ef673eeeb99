package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
	"github.com/oncemall/oncemall/services/coupon/internal/jobs"
	"github.com/oncemall/oncemall/services/coupon/internal/store"
	"github.com/oncemall/oncemall/services/coupon/migrations"
)

// TestJobsDeductAndArchive runs one pass of each job as the platform's cron
// would: the retry pass deducts a landed message (and a second pass finds
// nothing due), the archive moves an expired idempotent record and leaves a
// live one. (Scheduling, the Redis lock, overlap and recovery are the
// platform's, proven in pkg/platform/jobs_test.go.)
func TestJobsDeductAndArchive(t *testing.T) {
	ctx := context.Background()
	db := testenv.DB(t, migrations.Source, outbox.Migrations)
	st := store.New(db, func() {})
	a, err := app.New(st, app.DefaultConfig(), testenv.Logger(t), prometheus.NewRegistry())
	testenv.Must(t, err)
	tpl, err := a.CreateTemplate(ctx, coupon.Template{Name: "x", DiscountAmount: 1})
	testenv.Must(t, err)
	c, err := a.IssueCoupon(ctx, tpl.ID, 7)
	testenv.Must(t, err)
	now := time.Now().UTC()
	testenv.Must(t, st.InTx(ctx, func(tx coupon.Tx) error {
		if err := a.LandOrderPaid(ctx, tx, app.OrderPaid{MessageID: "m1", OrderNo: "O1", UserID: 7, CouponID: c.ID}); err != nil {
			return err
		}
		_, err := tx.InsertIdempotentRecord(ctx, coupon.IdempotentRecord{Key: "old", BizType: coupon.BizCouponUsedNotice,
			BizNo: "OLD", CreatedAt: now.Add(-48 * time.Hour), ExpireTime: now.Add(-time.Hour)})
		return err
	}))
	status := func() string {
		var s string
		testenv.Must(t, db.Table("coupon_message").Where("message_id = ?", "m1").Pluck("status", &s).Error)
		return s
	}

	retry := jobs.RetryPass(a, "@every 2s", testenv.Logger(t))
	if retry.Name == "" || retry.Schedule != "@every 2s" || retry.EveryReplica {
		t.Fatalf("retry job %+v: want a named job on the given schedule, on one replica at a time", retry)
	}
	testenv.Must(t, retry.Run(ctx))
	if s := status(); s != string(coupon.MessageSuccess) {
		t.Fatalf("after one retry pass the message is %s, want SUCCESS", s)
	}
	testenv.Must(t, retry.Run(ctx))
	var ledger int64
	testenv.Must(t, db.Table("coupon_deduction").Where("order_no = ?", "O1").Count(&ledger).Error)
	if ledger != 1 {
		t.Fatalf("%d ledger rows after two passes, want 1", ledger)
	}

	archive := jobs.ArchiveRecords(a, "@every 1h", testenv.Logger(t))
	if archive.Name == "" || archive.Name == retry.Name || archive.EveryReplica {
		t.Fatalf("archive job %+v: want a name of its own, on one replica at a time", archive)
	}
	testenv.Must(t, archive.Run(ctx))
	var archived, online int64
	testenv.Must(t, db.Table("biz_idempotent_record_archive").Where("idempotent_key = ?", "old").Count(&archived).Error)
	testenv.Must(t, db.Table("biz_idempotent_record").Count(&online).Error)
	if archived != 1 || online != 1 {
		t.Fatalf("archived %d, online %d; want the expired record archived and the deduction's notice record online", archived, online)
	}
}
