package lab

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncemall/oncemall/services/web/internal/pages"
	"github.com/oncemall/oncemall/services/web/internal/upstream"
)

// keyedShop answers PlaceOrder as an order service with an Idempotency-Key
// store does: one order per key, the copies of a key waiting for it.
type keyedShop struct {
	pages.Shop
	calls  atomic.Int32
	orders atomic.Int32
}

func (s *keyedShop) PlaceOrder(_ context.Context, _ upstream.Caller, key string, _ []upstream.Item, _ uint64) (upstream.Order, error) {
	if s.calls.Add(1)%2 == 1 {
		s.orders.Add(1)
	}
	time.Sleep(10 * time.Millisecond) // both copies in flight at once
	return upstream.Order{OrderNo: "O-" + key}, nil
}

// TestDoublerSendsArmedSubmitsTwiceAtOnce: armed for one submit, the next
// PlaceOrder reaches the service twice and both answers are recorded;
// the one after goes once.
func TestDoublerSendsArmedSubmitsTwiceAtOnce(t *testing.T) {
	shop := &keyedShop{}
	d := &doubler{Shop: shop}
	d.arm(1)
	o, err := d.PlaceOrder(context.Background(), upstream.Caller{}, "web-k1", nil, 0)
	if err != nil || o.OrderNo != "O-web-k1" || shop.calls.Load() != 2 {
		t.Fatalf("armed: %+v, %v after %d calls; want O-web-k1 after 2", o, err, shop.calls.Load())
	}
	if _, err := d.PlaceOrder(context.Background(), upstream.Caller{}, "web-k2", nil, 0); err != nil || shop.calls.Load() != 3 {
		t.Fatalf("disarmed: %v after %d calls; want 3", err, shop.calls.Load())
	}
	armed, n, split, last := d.state()
	if armed != 0 || n != 1 || split != 0 || len(last) != 1 || last[0].Answers != [2]string{"order O-web-k1", "order O-web-k1"} {
		t.Errorf("state: armed %d, doubled %d, split %d, last %+v", armed, n, split, last)
	}
}
