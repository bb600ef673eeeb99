package app_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/order/internal/app"
	"github.com/oncemall/oncemall/services/order/internal/assembly"
	"github.com/oncemall/oncemall/services/order/internal/order"
	"github.com/oncemall/oncemall/services/order/internal/ordertest"
	"github.com/oncemall/oncemall/services/order/internal/stubs"
)

// TestPriceChangedWhileTheCouponIsLocked: the catalog's price moves between
// the read that priced the order (and locked its coupon for that total)
// and the order's transaction. The transaction re-reads it and refuses
// with order.ErrPriceChanged; nothing is written and the coupon is
// released. The retry prices the order anew.
func TestPriceChangedWhileTheCouponIsLocked(t *testing.T) {
	env := ordertest.Start(t, nil, assembly.Options{})
	ctx := context.Background()
	kettle := env.Product(t, "Kettle", 1500, 5)
	env.Coupons.Add(stubs.Coupon{ID: 1, UserID: 1, Discount: 100, MinOrderAmount: 1000})
	env.Coupons.OnLock(func(string) {
		testenv.Must(t, env.DB.Exec("UPDATE products SET price = 1600 WHERE id = ?", kettle).Error)
	})
	coupon := uint64(1)
	cmd := app.CreateOrder{UserID: 1, Lines: []order.Line{{ProductID: kettle, Quantity: 1}}, CouponID: &coupon}
	if _, err := env.App.CreateOrder(ctx, cmd); !errors.Is(err, order.ErrPriceChanged) {
		t.Fatalf("price moved under the order: %v, want ErrPriceChanged", err)
	}
	if st, _ := env.Coupons.State(1); st != stubs.CouponUnused || env.Count(t, "SELECT COUNT(*) FROM orders") != 0 || env.Stock(t, kettle) != 5 {
		t.Fatalf("after the refusal: coupon %s, %d orders, stock %d", st, env.Count(t, "SELECT COUNT(*) FROM orders"), env.Stock(t, kettle))
	}
	env.Coupons.OnLock(nil)
	o, err := env.App.CreateOrder(ctx, cmd)
	if err != nil || o.TotalAmount != 1600 || o.PayAmount != 1500 {
		t.Fatalf("retry: %+v %v", o, err)
	}
}

// TestPanicAfterTheLockReleasesTheCoupon: a panic inside the order's
// transaction (a bug in a hook) rolls it back and still releases the
// coupon on its way up.
func TestPanicAfterTheLockReleasesTheCoupon(t *testing.T) {
	env := ordertest.Start(t, nil, assembly.Options{})
	kettle := env.Product(t, "Kettle", 1500, 5)
	env.Coupons.Add(stubs.Coupon{ID: 1, UserID: 1, Discount: 100})
	coupon := uint64(1)
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the hook's panic did not reach the caller")
			}
		}()
		_, _ = env.App.CreateOrder(context.Background(), app.CreateOrder{UserID: 1, Lines: []order.Line{{ProductID: kettle, Quantity: 1}}, CouponID: &coupon},
			func(context.Context, order.Tx, order.Order) error { panic("a bug in a hook") })
	}()
	if st, _ := env.Coupons.State(1); st != stubs.CouponUnused || env.Count(t, "SELECT COUNT(*) FROM orders") != 0 || env.Stock(t, kettle) != 5 {
		t.Fatalf("after the panic: coupon %s, %d orders, stock %d", st, env.Count(t, "SELECT COUNT(*) FROM orders"), env.Stock(t, kettle))
	}
}

// TestOrdersOfOverlappingProductsDoNotDeadlock: 60 orders at once, half of
// them for products A then B, half for B then A, each taking units of
// both. Every transaction takes the stock rows in product order, so none
// waits for another in a cycle: no deadlock victim, every order placed,
// and each product's stock down by exactly the units ordered.
func TestOrdersOfOverlappingProductsDoNotDeadlock(t *testing.T) {
	env := ordertest.Start(t, nil, assembly.Options{})
	a, b := env.Product(t, "A", 100, 1000), env.Product(t, "B", 200, 1000)
	const n = 60
	errs := make(chan error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		lines := []order.Line{{ProductID: a, Quantity: 1}, {ProductID: b, Quantity: 2}}
		if i%2 == 1 {
			lines = []order.Line{{ProductID: b, Quantity: 2}, {ProductID: a, Quantity: 1}}
		}
		wg.Go(func() {
			<-start
			_, err := env.App.CreateOrder(context.Background(), app.CreateOrder{UserID: uint64(i + 1), Lines: lines})
			errs <- err
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("an order failed: %v", err)
		}
	}
	if env.Stock(t, a) != 1000-n || env.Stock(t, b) != 1000-2*n || env.Count(t, "SELECT COUNT(*) FROM stock_reservation") != 2*n {
		t.Fatalf("stock %d and %d, %d reservations; want %d, %d and %d", env.Stock(t, a), env.Stock(t, b),
			env.Count(t, "SELECT COUNT(*) FROM stock_reservation"), 1000-n, 1000-2*n, 2*n)
	}
}
