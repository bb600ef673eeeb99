package messaging_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/coupon/internal/assembly"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
	"github.com/oncemall/oncemall/services/coupon/internal/coupontest"
	"github.com/oncemall/oncemall/services/coupon/internal/messaging"
)

// cancelRig is the order.cancelled consumer's world: the coupon service as
// it runs (coupontest), on real NATS and MariaDB under a unique event
// prefix, and a coupon locked by ORDER-1. The sweeper and the retry pass
// run hourly: what releases the lock is the consumer.
type cancelRig struct {
	*coupontest.Service
	coupon coupon.Coupon
}

func newCancelRig(t *testing.T, ctx context.Context, o assembly.Options) *cancelRig {
	t.Helper()
	o.Orders = noOrders{}
	svc := coupontest.Start(t, map[string]string{"COUPON_RETRY_SCHEDULE": "@every 1h", "COUPON_SWEEP_SCHEDULE": "@every 1h"}, o)
	tpl, err := svc.App.CreateTemplate(ctx, coupon.Template{Name: "10 off", DiscountAmount: 1000})
	testenv.Must(t, err)
	c, err := svc.App.IssueCoupon(ctx, tpl.ID, 7)
	testenv.Must(t, err)
	r := &cancelRig{Service: svc, coupon: c}
	r.lock(t, ctx, "ORDER-1")
	return r
}

func (r *cancelRig) lock(t *testing.T, ctx context.Context, orderNo string) {
	t.Helper()
	_, err := r.App.LockCoupon(ctx, r.coupon.ID, coupon.LockRequest{OrderNo: orderNo, UserID: 7, OrderAmount: 5000})
	testenv.Must(t, err)
}

func (r *cancelRig) state(t *testing.T) coupon.Coupon {
	t.Helper()
	c, err := r.App.Coupon(context.Background(), r.coupon.ID)
	testenv.Must(t, err)
	return c
}

// releases reads coupon_lock_releases_total{by="order_cancelled"}.
func (r *cancelRig) releases(t *testing.T) float64 {
	t.Helper()
	return testenv.Metric(t, r.Registry, "coupon_lock_releases_total", "by", "order_cancelled")
}

// handled counts the deliveries of order.cancelled the consumer ended with
// outcome.
func (r *cancelRig) handled(t *testing.T, outcome inbox.Outcome) float64 {
	t.Helper()
	return testenv.Metric(t, r.Registry, "inbox_messages_total", "consumer", messaging.OrderCancelledConsumer, "outcome", string(outcome))
}

// failFirstRelease fails the first release of a lock that changed a row,
// after the UPDATE ran: the connection lost before the commit, which rolls
// the delivery back, release and dedup row together.
type failFirstRelease struct {
	coupon.Tx
	failed *atomic.Bool
}

func (f failFirstRelease) ReleaseLock(ctx context.Context, id uint64, orderNo string, now time.Time) (int64, error) {
	n, err := f.Tx.ReleaseLock(ctx, id, orderNo, now)
	if err == nil && n == 1 && f.failed.CompareAndSwap(false, true) {
		return n, errors.New("connection lost before the commit")
	}
	return n, err
}

func cancelled(orderNo string, couponID uint64) events.OrderCancelledV1 {
	e := events.OrderCancelledV1{OrderNo: orderNo, UserID: 7, Reason: events.CancelTimeout, CancelledAt: time.Now().UTC()}
	if couponID != 0 {
		e.CouponID = &couponID
	}
	return e
}

// TestOrderCancelledReleasesTheLockOnceHoweverOftenDelivered drives the
// service's consumer through JetStream. The first delivery of the
// cancellation releases the lock and then fails, so its transaction rolls
// back and JetStream redelivers it; the event is then republished under its
// id and sent again under another id (the order service's close retried).
// The lock is released exactly once; an order without coupon needs nothing;
// a malformed event is dead-lettered. When another order has since locked
// the coupon, a late duplicate of the first order's cancellation leaves its
// lock alone.
func TestOrderCancelledReleasesTheLockOnceHoweverOftenDelivered(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var failed atomic.Bool
	r := newCancelRig(t, ctx, assembly.Options{Tx: func(tx coupon.Tx) coupon.Tx { return failFirstRelease{tx, &failed} }})

	waitHandled := func(n int) {
		t.Helper()
		testenv.WaitFor(t, 15*time.Second, fmt.Sprintf("the inbox to handle %d events", n), func() bool {
			return r.Count(t, "processed_message", "1 = 1")+r.Count(t, "dead_message", "1 = 1") >= n
		})
	}
	first := cancelled("ORDER-1", r.coupon.ID)
	r.Publish(t, events.OrderCancelled, "c1", first)
	waitHandled(1)
	if !failed.Load() || r.handled(t, inbox.Retry) != 1 || r.Count(t, "processed_message", "message_id = ?", "c1") != 1 {
		t.Fatalf("c1: fault fired %v, %v deliveries refused, processed %d times; want its first delivery rolled back and the redelivery processed",
			failed.Load(), r.handled(t, inbox.Retry), r.Count(t, "processed_message", "message_id = ?", "c1"))
	}
	r.Publish(t, events.OrderCancelled, "c1", first) // a republish: dropped by the stream or by the inbox
	r.Publish(t, events.OrderCancelled, "c2", first) // the same cancellation under another id
	r.Publish(t, events.OrderCancelled, "c3", cancelled("ORDER-9", 0))
	r.Publish(t, events.OrderCancelled, "c4", []byte("{not json"))
	waitHandled(4)

	if got := r.state(t); got.Status != coupon.StatusUnused || got.LockedOrderNo != "" || got.Version != 2 {
		t.Fatalf("coupon = %+v, want UNUSED, changed twice (lock, release)", got)
	}
	if v := r.releases(t); v != 1 {
		t.Fatalf("coupon_lock_releases_total{by=order_cancelled} = %v, want 1", v)
	}
	if r.Count(t, "dead_message", "message_id = ?", "c4") != 1 {
		t.Fatal("the malformed event was not dead-lettered")
	}

	r.lock(t, ctx, "ORDER-2")
	r.Publish(t, events.OrderCancelled, "c5", first) // a late duplicate of ORDER-1's cancellation
	waitHandled(5)
	if got := r.state(t); got.Status != coupon.StatusLocked || got.LockedOrderNo != "ORDER-2" {
		t.Fatalf("coupon = %+v, want still LOCKED by ORDER-2", got)
	}
	if v := r.releases(t); v != 1 {
		t.Fatalf("coupon_lock_releases_total{by=order_cancelled} = %v after the late duplicate, want 1", v)
	}
}

// TestConcurrentDeliveriesOfACancellationReleaseOnce races deliveries of
// one cancellation through the service's consumer (Process), as several replicas and
// redeliveries would: 20 of the same message id and 20 under distinct ids.
// The lock is released once.
func TestConcurrentDeliveriesOfACancellationReleaseOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := newCancelRig(t, ctx, assembly.Options{})
	cons := r.Consumer(t, messaging.OrderCancelledConsumer)
	body, err := json.Marshal(cancelled("ORDER-1", r.coupon.ID))
	testenv.Must(t, err)
	subject := r.Config.Events.Subject(events.OrderCancelled)
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
