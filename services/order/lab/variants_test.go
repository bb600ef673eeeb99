package lab_test

// The incidents' variants below HTTP: each broken one reproduces its
// incident through the use cases, each fixed one holds.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/order/internal/app"
	"github.com/oncemall/oncemall/services/order/internal/assembly"
	"github.com/oncemall/oncemall/services/order/internal/config"
	"github.com/oncemall/oncemall/services/order/internal/order"
	"github.com/oncemall/oncemall/services/order/internal/ordertest"
	"github.com/oncemall/oncemall/services/order/lab"
)

// TestStockModesUnderARace races 100 single-unit orders for 10 units in
// each stock mode, through the use case. The fixed and optimistic modes
// sell exactly 10 and refuse 90 with order.ErrOutOfStock, and the stock
// balances; the broken mode sells more than 10 (the test that proves the
// fix is the one that catches the bug).
func TestStockModesUnderARace(t *testing.T) {
	for _, mode := range []variant.Mode{variant.Fixed, lab.Optimistic, variant.Broken} {
		t.Run(string(mode), func(t *testing.T) {
			env := ordertest.Start(t, nil, lab.Variants(config.Modes{Stock: mode}))
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
	racing := &versionBumper{}
	env := ordertest.Start(t, nil, assembly.Options{Stock: racing})
	racing.db = env.DB
	p := env.Product(t, "Hot", 999, 10)
	_, err := env.App.CreateOrder(context.Background(), app.CreateOrder{UserID: 1, Lines: []order.Line{{ProductID: p, Quantity: 1}}})
	if !errors.Is(err, order.ErrStockContention) {
		t.Fatalf("every swap lost: %v, want ErrStockContention", err)
	}
	if racing.reads.Load() != lab.OptimisticAttempts {
		t.Fatalf("%d attempts, want the bound of %d", racing.reads.Load(), lab.OptimisticAttempts)
	}
	if env.Count(t, "SELECT COUNT(*) FROM orders") != 0 || env.Count(t, "SELECT COUNT(*) FROM stock_reservation") != 0 || env.Stock(t, p) != 10 {
		t.Fatal("a given-up order wrote something")
	}
}

// versionBumper is the optimistic variant whose transactions see another
// writer change the stock right after every ReadStock: the version moves,
// the units do not.
type versionBumper struct {
	lab.OptimisticStock
	db    *gorm.DB
	reads atomic.Int64
}

func (s *versionBumper) Reserve(ctx context.Context, tx order.Tx, l order.Line) error {
	return s.OptimisticStock.Reserve(ctx, bumpingTx{Tx: tx, s: s}, l)
}

type bumpingTx struct {
	order.Tx
	s *versionBumper
}

func (t bumpingTx) WriteStock(ctx context.Context, productID uint64, available int) error {
	return t.Tx.(lab.StockTx).WriteStock(ctx, productID, available)
}

func (t bumpingTx) SwapStock(ctx context.Context, s order.Stock, available int) (bool, error) {
	return t.Tx.(lab.StockTx).SwapStock(ctx, s, available)
}

func (t bumpingTx) ReadStock(ctx context.Context, productID uint64) (order.Stock, error) {
	st, err := t.Tx.(lab.StockTx).ReadStock(ctx, productID)
	t.s.reads.Add(1)
	if err == nil {
		err = t.s.db.WithContext(ctx).Exec("UPDATE product_stock SET version = version + 1 WHERE product_id = ?", productID).Error
	}
	return st, err
}

// TestCloseModesWhenTheCustomerHasPaid: the customer paid at the platform
// a moment before the owner's cancel (the payment service finds the charge
// paid; its payment.succeeded is on the way). The invariant: an order the
// customer paid is not cancelled. The fixed close asks the payment service
// first and leaves the order WAIT_PAY with its stock reserved; the broken
// close (ORDER_CLOSE_MODE=broken, incident 6) never asks and cancels it,
// releasing the stock of a paid order, and the payment that lands next
// finds a cancelled order.
func TestCloseModesWhenTheCustomerHasPaid(t *testing.T) {
	for _, mode := range []variant.Mode{variant.Fixed, variant.Broken} {
		t.Run(string(mode), func(t *testing.T) {
			env := ordertest.Start(t, nil, lab.Variants(config.Modes{Close: mode}))
			ctx := context.Background()
			p := env.Product(t, "A", 100, 5)
			o := env.PlaceOrder(t, 1, order.Line{ProductID: p, Quantity: 1})
			env.Payments.SetPaid(o.No)
			_, cancelErr := env.App.CancelOrder(ctx, 1, o.No)
			_, payErr := env.Pay(ctx, o, "P-"+o.No)
			holds := cancelErr != nil && payErr == nil && env.Status(t, o.No) == order.StatusPaid &&
				env.Reservations(t, o.No, order.Confirmed) == 1 && env.Stock(t, p) == 4
			t.Logf("%s: cancel %v; payment %v; order %s, %d close calls", mode, cancelErr, payErr, env.Status(t, o.No), env.Payments.Closes(o.No))
			switch {
			case mode == variant.Fixed && (!holds || !errors.Is(cancelErr, order.ErrConflict) || env.Payments.Closes(o.No) != 1):
				t.Fatal("the fixed close cancelled an order the customer had paid")
			case mode == variant.Broken && (holds || env.Payments.Closes(o.No) != 0 || !errors.Is(payErr, order.ErrConflict) || env.Stock(t, p) != 5):
				t.Fatal("the broken close did not reproduce incident 6: it should cancel the paid order without asking and release its stock")
			}
		})
	}
}
