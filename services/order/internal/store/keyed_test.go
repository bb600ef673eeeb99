package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/order/internal/order"
	"github.com/oncemall/oncemall/services/order/internal/ordertest"
	"github.com/oncemall/oncemall/services/order/internal/store"
)

// TestStateUpdatesReadByKey: the order's move and its reservation's move
// find their row by its unique key, never by a status index (see
// database.ByKey for the deadlock that reading a status index invites).
// MariaDB is asked for the plan of the statements the store really sent.
func TestStateUpdatesReadByKey(t *testing.T) {
	env := ordertest.New(t, nil)
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
	s := store.New(db, func() {})
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
