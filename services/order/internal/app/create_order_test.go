package app_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/order/internal/app"
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
	env := ordertest.New(t, nil)
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
	env := ordertest.New(t, nil)
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
	env := ordertest.New(t, nil)
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

// TestStockModesUnderARace races 100 single-unit orders for 10 units in
// each stock mode, through the use case. The fixed and optimistic modes
// sell exactly 10 and refuse 90 with order.ErrOutOfStock, and the stock
// balances; the broken mode sells more than 10 (the test that proves the
// fix is the one that catches the bug).
func TestStockModesUnderARace(t *testing.T) {
	for _, mode := range []variant.Mode{variant.Fixed, app.Optimistic, variant.Broken} {
		t.Run(string(mode), func(t *testing.T) {
			cfg := ordertest.Config()
			cfg.Stock = mode
			env := ordertest.New(t, &cfg)
			p := env.Product(t, "Hot", 999, 10)
			var placed, outOfStock, other int
			var mu sync.Mutex
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range 100 {
				wg.Go(func() {
					<-start
					_, err := env.App.CreateOrder(context.Background(), app.CreateOrder{UserID: uint64(i + 1), Lines: []order.Line{{ProductID: p, Quantity: 1}}})
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						placed++
					case errors.Is(err, order.ErrOutOfStock):
						outOfStock++
					default:
						other++
						t.Log(err)
					}
				})
			}
			close(start)
			wg.Wait()
			sold := env.Count(t, "SELECT COALESCE(SUM(quantity), 0) FROM stock_reservation WHERE product_id = ?", p)
			left := env.Stock(t, p)
			t.Logf("%s: %d placed, %d out of stock, %d other; %d sold, %d left", mode, placed, outOfStock, other, sold, left)
			if mode == variant.Broken {
				if sold <= 10 || sold+left == 10 {
					t.Fatalf("broken sold %d with %d left: it should oversell", sold, left)
				}
				return
			}
			if placed != 10 || outOfStock != 90 || other != 0 || sold != 10 || left != 0 {
				t.Fatalf("%s: %d placed, %d out of stock, %d other, %d sold, %d left; want 10, 90, 0, 10, 0", mode, placed, outOfStock, other, sold, left)
			}
		})
	}
}

// TestOptimisticGivesUpAfterItsBound: an order that loses every
// compare-and-set (another writer changes the stock's version right after
// each read) runs its transaction the bounded number of times, then gives
// up with order.ErrStockContention, writing nothing.
func TestOptimisticGivesUpAfterItsBound(t *testing.T) {
	cfg := ordertest.Config()
	cfg.Stock = app.Optimistic
	env := ordertest.New(t, &cfg)
	p := env.Product(t, "Hot", 999, 10)
	racing := &versionBumper{Store: env.Orders, db: env.DB}
	a := env.NewAppOn(t, racing, cfg)
	_, err := a.CreateOrder(context.Background(), app.CreateOrder{UserID: 1, Lines: []order.Line{{ProductID: p, Quantity: 1}}})
	if !errors.Is(err, order.ErrStockContention) {
		t.Fatalf("every swap lost: %v, want ErrStockContention", err)
	}
	if racing.reads.Load() != 30 {
		t.Fatalf("%d attempts, want the bound of 30", racing.reads.Load())
	}
	if env.Count(t, "SELECT COUNT(*) FROM orders") != 0 || env.Count(t, "SELECT COUNT(*) FROM stock_reservation") != 0 || env.Stock(t, p) != 10 {
		t.Fatal("a given-up order wrote something")
	}
}

// versionBumper is an order.Store whose transactions see another writer
// change the stock right after every ReadStock: the version moves, the
// units do not.
type versionBumper struct {
	order.Store
	db    *gorm.DB
	reads atomic.Int64
}

func (s *versionBumper) InTx(ctx context.Context, fn func(order.Tx) error) error {
	return s.Store.InTx(ctx, func(tx order.Tx) error { return fn(bumpingTx{Tx: tx, s: s}) })
}

type bumpingTx struct {
	order.Tx
	s *versionBumper
}

func (t bumpingTx) ReadStock(ctx context.Context, productID uint64) (order.Stock, error) {
	st, err := t.Tx.ReadStock(ctx, productID)
	t.s.reads.Add(1)
	if err == nil {
		err = t.s.db.WithContext(ctx).Exec("UPDATE product_stock SET version = version + 1 WHERE product_id = ?", productID).Error
	}
	return st, err
}
