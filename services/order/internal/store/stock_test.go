package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/order/internal/assembly"
	"github.com/oncemall/oncemall/services/order/internal/order"
	"github.com/oncemall/oncemall/services/order/internal/ordertest"
	"github.com/oncemall/oncemall/services/order/internal/store"
)

// TestReservationsMoveOnce: each reservation leaves RESERVED once. A
// second release gives nothing back, a confirm after a release confirms
// nothing, and a release after a confirm releases nothing; the conditional
// decrement takes units only while there are enough.
func TestReservationsMoveOnce(t *testing.T) {
	env := ordertest.Start(t, nil, assembly.Options{})
	ctx := context.Background()
	a, b := env.Product(t, "A", 100, 5), env.Product(t, "B", 100, 5)
	lines := []order.Line{{ProductID: b, Quantity: 2}, {ProductID: a, Quantity: 3}}
	released := env.PlaceOrder(t, 1, lines...)
	confirmed := env.PlaceOrder(t, 1, order.Line{ProductID: a, Quantity: 1})
	now := time.Now().UTC()
	inTx := func(fn func(order.Tx) (int, error)) int {
		t.Helper()
		var n int
		testenv.Must(t, env.Orders.InTx(ctx, func(tx order.Tx) error {
			var err error
			n, err = fn(tx)
			return err
		}))
		return n
	}
	release := func(no string, ls []order.Line) int {
		return inTx(func(tx order.Tx) (int, error) { return tx.ReleaseReservations(ctx, no, ls, now) })
	}
	confirm := func(no string, ls []order.Line) int {
		return inTx(func(tx order.Tx) (int, error) { return tx.ConfirmReservations(ctx, no, ls, now) })
	}
	if n := release(released.No, lines); n != 2 || env.Stock(t, a) != 4 || env.Stock(t, b) != 5 {
		t.Fatalf("first release moved %d, stock %d and %d; want 2, 4 and 5", n, env.Stock(t, a), env.Stock(t, b))
	}
	if n := release(released.No, lines); n != 0 || env.Stock(t, a) != 4 || env.Stock(t, b) != 5 {
		t.Fatalf("second release moved %d, stock %d and %d; want nothing back", n, env.Stock(t, a), env.Stock(t, b))
	}
	if n := confirm(released.No, lines); n != 0 || env.Reservations(t, released.No, order.Released) != 2 {
		t.Fatalf("confirm after release moved %d", n)
	}
	one := []order.Line{{ProductID: a, Quantity: 1}}
	if n := confirm(confirmed.No, one); n != 1 {
		t.Fatalf("confirm moved %d, want 1", n)
	}
	if n := confirm(confirmed.No, one) + release(confirmed.No, one); n != 0 || env.Stock(t, a) != 4 {
		t.Fatalf("confirm and release after a confirm moved %d, stock %d", n, env.Stock(t, a))
	}

	took := inTx(func(tx order.Tx) (int, error) {
		ok, err := tx.DecrementStock(ctx, a, 5)
		if ok {
			return 1, err
		}
		return 0, err
	})
	if took != 0 || env.Stock(t, a) != 4 {
		t.Fatalf("took 5 of 4 units: %d, stock %d", took, env.Stock(t, a))
	}
}

// TestStateUpdatesReadByKey: the order's move and its reservation's move
// find their row by its unique key, never by a status index (see
// database.ByKey for the deadlock that reading a status index invites).
// MariaDB is asked for the plan of the statements the store really sent.
func TestStateUpdatesReadByKey(t *testing.T) {
	env := ordertest.Start(t, nil, assembly.Options{})
	ctx := context.Background()
	line := order.Line{ProductID: env.Product(t, "A", 100, 10), Quantity: 1}
	for range 3 {
		env.PlaceOrder(t, 1, line)
	}
	// The order moved is the only one waiting: on such a table MariaDB's
	// own plan reads the status indexes.
	testenv.Must(t, env.DB.Exec("UPDATE orders SET status = 'CANCELLED'").Error)
	testenv.Must(t, env.DB.Exec("UPDATE stock_reservation SET status = 'RELEASED'").Error)
	o := env.PlaceOrder(t, 2, line)
	db, rec := testenv.RecordSQL(env.DB)
	s := store.New(db, func(...outbox.Message) {})
	now := time.Now().UTC()
	testenv.Must(t, s.InTx(ctx, func(tx order.Tx) error {
		err := tx.UpdateOrder(ctx, o.No, func(o *order.Order) error {
			_, err := o.Cancel(order.ReasonCustomer, now)
			return err
		})
		if err != nil {
			return err
		}
		_, err = tx.ReleaseReservations(ctx, o.No, []order.Line{line}, now)
		return err
	}))
	// The order, its reservation, and the stock given back.
	testenv.RequireKeyed(t, env.DB, rec.Take("UPDATE"), 3)
}
