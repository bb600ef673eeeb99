package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/redislock"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
	"github.com/oncemall/oncemall/services/coupon/internal/jobs"
	"github.com/oncemall/oncemall/services/coupon/internal/store"
	"github.com/oncemall/oncemall/services/coupon/migrations"
)

// TestSchedulerDeductsAndArchives: with the schedules at one second, a landed
// message is deducted and an expired idempotent record archived without any
// call but Start.
func TestSchedulerDeductsAndArchives(t *testing.T) {
	ctx := context.Background()
	db := testenv.DB(t, migrations.Source, outbox.Migrations)
	st := store.New(db)
	a, err := app.New(st, nil, app.DefaultConfig(), testenv.Logger(t), prometheus.NewRegistry())
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

	s, err := jobs.New(a, jobs.Config{RetrySchedule: "@every 1s", ArchiveSchedule: "@every 1s", LockTTL: 10 * time.Second}, nil, testenv.Logger(t))
	testenv.Must(t, err)
	s.Start()
	defer func() { testenv.Must(t, s.Stop(ctx)) }()

	deadline := time.Now().Add(10 * time.Second)
	for {
		var status string
		var archived int64
		testenv.Must(t, db.Table("coupon_message").Where("message_id = ?", "m1").Pluck("status", &status).Error)
		testenv.Must(t, db.Table("biz_idempotent_record_archive").Where("idempotent_key = ?", "old").Count(&archived).Error)
		if status == string(coupon.MessageSuccess) && archived == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: message %s, %d archived", status, archived)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestConfigRefusesBadSchedules(t *testing.T) {
	if err := (jobs.Config{RetrySchedule: "every 2s", ArchiveSchedule: "@every 1h", LockTTL: time.Minute}).Validate(); err == nil {
		t.Fatal("a malformed retry schedule was accepted")
	}
	if err := (jobs.Config{RetrySchedule: "@every 2s", ArchiveSchedule: "@every 1h", LockTTL: time.Minute}).Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestRetryPassRunsOnOneReplicaAndWithoutRedis: while another replica holds
// the lock the pass is skipped; once released it runs; with Redis
// unreachable it runs unlocked, since the SKIP LOCKED claim is what keeps it
// correct.
func TestRetryPassRunsOnOneReplicaAndWithoutRedis(t *testing.T) {
	ctx := context.Background()
	db := testenv.DB(t, migrations.Source, outbox.Migrations)
	st := store.New(db)
	a, err := app.New(st, nil, app.DefaultConfig(), testenv.Logger(t), prometheus.NewRegistry())
	testenv.Must(t, err)
	tpl, err := a.CreateTemplate(ctx, coupon.Template{Name: "x", DiscountAmount: 1})
	testenv.Must(t, err)
	land := func(msgID, orderNo string) {
		c, err := a.IssueCoupon(ctx, tpl.ID, 7)
		testenv.Must(t, err)
		testenv.Must(t, st.InTx(ctx, func(tx coupon.Tx) error {
			return a.LandOrderPaid(ctx, tx, app.OrderPaid{MessageID: msgID, OrderNo: orderNo, UserID: 7, CouponID: c.ID})
		}))
	}
	status := func(msgID string) string {
		var s string
		testenv.Must(t, db.Table("coupon_message").Where("message_id = ?", msgID).Pluck("status", &s).Error)
		return s
	}
	cfg := jobs.Config{RetrySchedule: "@every 1h", ArchiveSchedule: "@every 1h", LockTTL: 10 * time.Second}

	rdb, prefix := testenv.Redis(t)
	locks := redislock.New(rdb, prefix)
	replica, err := jobs.New(a, cfg, locks, testenv.Logger(t))
	testenv.Must(t, err)
	land("m1", "O1")
	held, err := locks.Acquire(ctx, jobs.RetryLock, 10*time.Second) // another replica's pass
	testenv.Must(t, err)
	if replica.RetryPass(ctx) || status("m1") != "PENDING" {
		t.Fatalf("the pass ran while another replica held the lock (message %s)", status("m1"))
	}
	testenv.Must(t, held.Release(ctx))
	if !replica.RetryPass(ctx) || status("m1") != "SUCCESS" {
		t.Fatalf("the pass did not run after the lock was released (message %s)", status("m1"))
	}

	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer down.Close()
	noRedis, err := jobs.New(a, cfg, redislock.New(down, prefix), testenv.Logger(t))
	testenv.Must(t, err)
	land("m2", "O2")
	if !noRedis.RetryPass(ctx) || status("m2") != "SUCCESS" {
		t.Fatalf("with Redis down the pass did not run (message %s)", status("m2"))
	}
}
