package messaging_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/natsjs"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/assembly"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
	"github.com/oncemall/oncemall/services/coupon/internal/coupontest"
	"github.com/oncemall/oncemall/services/coupon/internal/messaging"
	"github.com/oncemall/oncemall/services/coupon/internal/store"
	"github.com/oncemall/oncemall/services/coupon/migrations"
)

// cancelRig is the order.cancelled consumer's world on real NATS and
// MariaDB, under a unique event prefix: a coupon locked by ORDER-1.
type cancelRig struct {
	db     *gorm.DB
	app    *app.App
	store  *store.Store
	reg    *prometheus.Registry
	coupon coupon.Coupon
	js     jetstream.JetStream
	ev     events.Config
}

func newCancelRig(t *testing.T, ctx context.Context) *cancelRig {
	t.Helper()
	conn := testenv.NATS(t)
	ev := events.Config{SubjectPrefix: strings.ToLower(testenv.UniqueName(t, "coupon")) + "."}
	_, err := natsjs.EnsureStream(ctx, conn.JS, natsjs.EventStream(ev, events.OrderCancelled))
	testenv.Must(t, err)
	testenv.DeleteStreamAtCleanup(t, conn.JS, ev.StreamName(events.OrderCancelled))
	db := testenv.DB(t, migrations.Source, outbox.Migrations, inbox.Migrations)
	reg := prometheus.NewRegistry()
	p, err := assembly.UseCases(db, coupontest.Settings(t, nil), assembly.Options{Orders: noOrders{}}, testenv.Logger(t), reg, nil)
	testenv.Must(t, err)
	a := p.App
	tpl, err := a.CreateTemplate(ctx, coupon.Template{Name: "10 off", DiscountAmount: 1000})
	testenv.Must(t, err)
	c, err := a.IssueCoupon(ctx, tpl.ID, 7)
	testenv.Must(t, err)
	r := &cancelRig{db: db, app: a, store: p.Store, reg: reg, coupon: c, js: conn.JS, ev: ev}
	r.lock(t, ctx, "ORDER-1")
	return r
}

func (r *cancelRig) lock(t *testing.T, ctx context.Context, orderNo string) {
	t.Helper()
	_, err := r.app.LockCoupon(ctx, r.coupon.ID, coupon.LockRequest{OrderNo: orderNo, UserID: 7, OrderAmount: 5000})
	testenv.Must(t, err)
}

// consumer declares the service's order.cancelled consumer with handle in
// place of its handler (handle may wrap it).
func (r *cancelRig) consumer(t *testing.T, handle inbox.Handler) *inbox.Consumer {
	t.Helper()
	decl := platform.Bind(r.store.InboxTx, messaging.OrderCancelled(r.app))
	if decl.Subject != events.OrderCancelled || decl.Name != messaging.OrderCancelledConsumer {
		t.Fatalf("the consumer is %q on %q, want %q on %q", decl.Name, decl.Subject, messaging.OrderCancelledConsumer, events.OrderCancelled)
	}
	if handle == nil {
		handle = decl.Handle
	}
	cons, err := inbox.NewConsumer(r.db, r.js, inbox.Config{
		Name: decl.Name, Stream: r.ev.StreamName(decl.Subject), FilterSubjects: []string{r.ev.Subject(decl.Subject)},
		Workers: 4, MaxDeliver: 5, AckWait: 5 * time.Second, Backoff: []time.Duration{50 * time.Millisecond},
	}, handle, testenv.Logger(t), prometheus.NewRegistry())
	testenv.Must(t, err)
	return cons
}

func (r *cancelRig) state(t *testing.T) coupon.Coupon {
	t.Helper()
	c, err := r.app.Coupon(context.Background(), r.coupon.ID)
	testenv.Must(t, err)
	return c
}

// releases reads coupon_lock_releases_total{by="order_cancelled"}.
func (r *cancelRig) releases(t *testing.T) float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	testenv.Must(t, err)
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if mf.GetName() == "coupon_lock_releases_total" && lp.GetValue() == "order_cancelled" {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func cancelled(orderNo string, couponID uint64) events.OrderCancelledV1 {
	e := events.OrderCancelledV1{OrderNo: orderNo, UserID: 7, Reason: events.CancelTimeout, CancelledAt: time.Now().UTC()}
	if couponID != 0 {
		e.CouponID = &couponID
	}
	return e
}

// TestOrderCancelledReleasesTheLockOnceHoweverOftenDelivered drives the
// consumer through JetStream. The first delivery of the cancellation
// releases the lock and then fails, so its transaction rolls back and
// JetStream redelivers it; the event is also republished under its id and
// sent again under another id (the order service's close retried). The
// lock is released exactly once; an order without coupon needs nothing; a
// malformed event is dead-lettered. When another order has since locked the
// coupon, a late duplicate of the first order's cancellation leaves its
// lock alone.
func TestOrderCancelledReleasesTheLockOnceHoweverOftenDelivered(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := newCancelRig(t, ctx)

	var mu sync.Mutex
	deliveries := map[string]int{}
	real := platform.Bind(r.store.InboxTx, messaging.OrderCancelled(r.app)).Handle
	cons := r.consumer(t, func(ctx context.Context, tx *gorm.DB, msg inbox.Message) error {
		mu.Lock()
		deliveries[msg.ID]++
		first := deliveries[msg.ID] == 1
		mu.Unlock()
		if err := real(ctx, tx, msg); err != nil {
			return err
		}
		if msg.ID == "c1" && first {
			return errors.New("connection lost before the commit")
		}
		return nil
	})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- cons.Run(runCtx) }()
	defer func() { stop(); <-done }()

	publish := func(id string, body any) {
		b, ok := body.([]byte)
		if !ok {
			b, _ = json.Marshal(body)
		}
		_, err := r.js.Publish(ctx, r.ev.Subject(events.OrderCancelled), b, jetstream.WithMsgID(id))
		testenv.Must(t, err)
	}
	waitHandled := func(n int64) {
		t.Helper()
		testenv.WaitFor(t, 15*time.Second, fmt.Sprintf("the inbox to handle %d events", n), func() bool {
			var handled, dead int64
			testenv.Must(t, r.db.Table("processed_message").Count(&handled).Error)
			testenv.Must(t, r.db.Table("dead_message").Count(&dead).Error)
			return handled+dead >= n
		})
	}
	first := cancelled("ORDER-1", r.coupon.ID)
	publish("c1", first)
	publish("c1", first) // a republish: dropped by the stream or by the inbox
	publish("c2", first) // the same cancellation under another id
	publish("c3", cancelled("ORDER-9", 0))
	publish("c4", []byte("{not json"))
	waitHandled(4)

	mu.Lock()
	redelivered := deliveries["c1"]
	mu.Unlock()
	if redelivered < 2 {
		t.Fatalf("c1 was delivered %d times, want the failed first delivery and its redelivery", redelivered)
	}
	if got := r.state(t); got.Status != coupon.StatusUnused || got.LockedOrderNo != "" || got.Version != 2 {
		t.Fatalf("coupon = %+v, want UNUSED, changed twice (lock, release)", got)
	}
	if v := r.releases(t); v != 1 {
		t.Fatalf("coupon_lock_releases_total{by=order_cancelled} = %v, want 1", v)
	}
	var dead int64
	testenv.Must(t, r.db.Table("dead_message").Where("message_id = ?", "c4").Count(&dead).Error)
	if dead != 1 {
		t.Fatal("the malformed event was not dead-lettered")
	}

	r.lock(t, ctx, "ORDER-2")
	publish("c5", first) // a late duplicate of ORDER-1's cancellation
	waitHandled(5)
	if got := r.state(t); got.Status != coupon.StatusLocked || got.LockedOrderNo != "ORDER-2" {
		t.Fatalf("coupon = %+v, want still LOCKED by ORDER-2", got)
	}
	if v := r.releases(t); v != 1 {
		t.Fatalf("coupon_lock_releases_total{by=order_cancelled} = %v after the late duplicate, want 1", v)
	}
}

// TestConcurrentDeliveriesOfACancellationReleaseOnce races deliveries of
// one cancellation through the inbox's Process, as several replicas and
// redeliveries would: 20 of the same message id and 20 under distinct ids.
// The lock is released once.
func TestConcurrentDeliveriesOfACancellationReleaseOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := newCancelRig(t, ctx)
	cons := r.consumer(t, nil)
	body, err := json.Marshal(cancelled("ORDER-1", r.coupon.ID))
	testenv.Must(t, err)
	subject := r.ev.Subject(events.OrderCancelled)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 40 {
		id := "same"
		if i%2 == 1 {
			id = fmt.Sprintf("other-%d", i)
		}
		wg.Go(func() {
			<-start
			if out, err := cons.Process(ctx, inbox.Message{ID: id, Subject: subject, Body: body, Delivered: 1}); err != nil {
				t.Errorf("delivery %s: %s, %v", id, out, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if got := r.state(t); got.Status != coupon.StatusUnused || got.Version != 2 {
		t.Fatalf("coupon = %+v, want UNUSED, changed twice (lock, release)", got)
	}
	if v := r.releases(t); v != 1 {
		t.Fatalf("coupon_lock_releases_total{by=order_cancelled} = %v, want 1", v)
	}
}
