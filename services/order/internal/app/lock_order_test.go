package app_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/order/internal/app"
	"github.com/oncemall/oncemall/services/order/internal/assembly"
	"github.com/oncemall/oncemall/services/order/internal/order"
	"github.com/oncemall/oncemall/services/order/internal/ordertest"
)

// TestPlacingAnOrderBesideACancelWaitsForNothing: a cancel holds its order
// and reservation, and then gives the units back; an order for the same
// product placed meanwhile has its rows land next to the cancel's in the
// unique keys. Under REPEATABLE READ the cancel also locked the gap before
// its entries, the new order's insert waited there, and when it had taken
// the units first the two deadlocked (seen under load: a POST /orders
// answered 500; placeInTx now writes rows before it takes units). The
// pool's READ COMMITTED takes no gap locks, so the new order does not wait
// for the cancel at all: it commits while the cancel is still open, and the
// cancel then finishes.
func TestPlacingAnOrderBesideACancelWaitsForNothing(t *testing.T) {
	env := ordertest.Start(t, nil, assembly.Options{})
	ctx := context.Background()
	line := order.Line{ProductID: env.Product(t, "A", 100, 10), Quantity: 1}
	now := time.Now().UTC()

	// The order being cancelled has the highest number, so the gap before
	// its entries is where every new order's rows go.
	last := "O9" + strings.Repeat("9", 25)
	testenv.Must(t, env.Orders.InTx(ctx, func(tx order.Tx) error {
		o, err := order.New(last, 1, []order.Item{{ProductID: line.ProductID, Name: "A", UnitPrice: 100, Quantity: 1}}, nil, 0, now)
		if err != nil {
			return err
		}
		if _, err := tx.DecrementStock(ctx, line.ProductID, 1); err != nil {
			return err
		}
		if err := tx.AddReservations(ctx, last, []order.Line{line}, now); err != nil {
			return err
		}
		return tx.Insert(ctx, o)
	}))

	moved, resume := make(chan struct{}), make(chan struct{})
	var resumeOnce sync.Once
	goOn := func() { resumeOnce.Do(func() { close(resume) }) }
	defer goOn() // a failing test still lets the cancel end, so its database can be dropped
	cancelled := make(chan error, 1)
	go func() {
		cancelled <- env.Orders.InTx(ctx, func(tx order.Tx) error {
			err := tx.UpdateOrder(ctx, last, func(o *order.Order) error {
				_, err := o.Cancel(order.ReasonCustomer, now)
				return err
			})
			if err != nil {
				return err
			}
			close(moved)
			<-resume
			_, err = tx.ReleaseReservations(ctx, last, []order.Line{line}, now)
			return err
		})
	}()
	select {
	case <-moved:
	case err := <-cancelled:
		t.Fatalf("the cancel ended before it moved the order: %v", err)
	}
	// The cancel is open, holding its order and reservation: the new order
	// goes through all the same.
	placeCtx, cancelPlace := context.WithTimeout(ctx, 10*time.Second)
	defer cancelPlace()
	if _, err := env.App.CreateOrder(placeCtx, app.CreateOrder{UserID: 2, Lines: []order.Line{line}}); err != nil {
		t.Fatalf("the order placed beside the open cancel: %v", err)
	}
	goOn()
	if err := <-cancelled; err != nil {
		t.Fatalf("the cancel: %v", err)
	}
	if got := env.Stock(t, line.ProductID); got != 9 {
		t.Fatalf("stock %d, want 9 (10, one back from the cancel, one taken by the new order)", got)
	}
}
