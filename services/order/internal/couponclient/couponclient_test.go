package couponclient_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/oncemall/oncemall/services/order/internal/couponclient"
	"github.com/oncemall/oncemall/services/order/internal/order"
	"github.com/oncemall/oncemall/services/order/internal/stubs"
)

// TestClientSpeaksTheContract: against the coupon stub, a lock comes back
// with its discount and deadline, a repeated lock by the same order gets
// the same lock, a refusal is *order.CouponRefusedError with the reason, a
// release frees only the order's own lock, and a wrong token, a 5xx or an
// unreadable answer are order.ErrUnavailable.
func TestClientSpeaksTheContract(t *testing.T) {
	svc := stubs.NewCouponService("token")
	defer svc.Close()
	svc.Add(stubs.Coupon{ID: 7, UserID: 1, Discount: 300, MinOrderAmount: 1000})
	c := couponclient.New(svc.URL+"/", "token", &http.Client{Timeout: time.Second})
	ctx := context.Background()
	req := order.CouponLockRequest{CouponID: 7, OrderNo: "O1", UserID: 1, OrderAmount: 1500}
	for range 2 {
		lock, err := c.Lock(ctx, req)
		if err != nil || lock.CouponID != 7 || lock.OrderNo != "O1" || lock.DiscountAmount != 300 || time.Until(lock.LockedUntil) < 40*time.Minute {
			t.Fatalf("lock: %+v %v", lock, err)
		}
	}
	other := req
	other.OrderNo = "O2"
	var refused *order.CouponRefusedError
	if _, err := c.Lock(ctx, other); !errors.As(err, &refused) || refused.Reason != "not_available" || refused.CouponID != 7 {
		t.Fatalf("lock by another order: %v", err)
	}
	if released, err := c.Release(ctx, 7, "O2", ""); err != nil || released {
		t.Fatalf("release by an order without the lock: %v %v", released, err)
	}
	if released, err := c.Release(ctx, 7, "O1", ""); err != nil || !released {
		t.Fatalf("release by the holder: %v %v", released, err)
	}

	wrong := couponclient.New(svc.URL, "other", http.DefaultClient)
	if _, err := wrong.Lock(ctx, req); !errors.Is(err, order.ErrUnavailable) {
		t.Fatalf("wrong token: %v, want ErrUnavailable", err)
	}
	if _, err := wrong.Release(ctx, 7, "O1", ""); !errors.Is(err, order.ErrUnavailable) {
		t.Fatalf("release with a wrong token: %v, want ErrUnavailable", err)
	}
	for name, h := range map[string]http.HandlerFunc{
		"500":              func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) },
		"422 no reason":    func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusUnprocessableEntity) },
		"200 not JSON":     func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) },
		"no answer at all": func(w http.ResponseWriter, _ *http.Request) { panic(http.ErrAbortHandler) },
	} {
		srv := httptest.NewServer(h)
		if _, err := couponclient.New(srv.URL, "token", http.DefaultClient).Lock(ctx, req); !errors.Is(err, order.ErrUnavailable) {
			t.Errorf("%s: %v, want ErrUnavailable", name, err)
		}
		srv.Close()
	}
}
