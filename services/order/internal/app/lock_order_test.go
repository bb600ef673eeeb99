package app_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/order/internal/app"
	"github.com/oncemall/oncemall/services/order/internal/order"
	"github.com/oncemall/oncemall/services/order/internal/ordertest"
)

// TestPlacingAnOrderBesideACancelDoesNotDeadlock: a cancel holds its
// order and reservation (MariaDB locks a unique key's entry and the gap
// before it) and then gives the units back; an order for the same product
// placed meanwhile lands in that gap. Taking the units first, the new order
// held the stock row while it waited on the gap, the cancel waited on the
// stock row, and InnoDB killed one of them (seen under load: a POST /orders
// answered 500). The order now writes its rows before it takes units, so
// it waits holding nothing the cancel needs, and both succeed.
func TestPlacingAnOrderBesideACancelDoesNotDeadlock(t *testing.T) {
	env := ordertest.New(t, nil)
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
	placed := make(chan error, 1)
	go func() {
		_, err := env.App.CreateOrder(ctx, app.CreateOrder{UserID: 2, Lines: []order.Line{line}})
		placed <- err
	}()
	// The new order is waiting on the cancel's lock before the cancel goes
	// on to give its units back.
	// (MariaDB's information_schema does not list this wait, so it is
	// seen as an insert of this database that has run for half a second.)
	testenv.WaitFor(t, 10*time.Second, "the new order waiting on the cancel", func() bool {
		return env.Count(t, `SELECT COUNT(*) FROM information_schema.processlist
			WHERE db = DATABASE() AND info LIKE 'INSERT INTO%' AND time_ms > 500`) > 0
	})
	goOn()
	if err := <-cancelled; err != nil {
		t.Fatalf("the cancel: %v", err)
	}
	if err := <-placed; err != nil {
		t.Fatalf("the order placed beside it: %v", err)
	}
	if got := env.Stock(t, line.ProductID); got != 9 {
		t.Fatalf("stock %d, want 9 (10, one back from the cancel, one taken by the new order)", got)
	}
}
