package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/order/internal/order"
	"github.com/oncemall/oncemall/services/order/internal/store"
	"github.com/oncemall/oncemall/services/order/migrations"
)

// TestEventsAreSentOnceAfterTheirCommit: a transaction that adds events
// hands them to the relay once, after it committed, each event once; one
// that rolls back or adds none hands over nothing. The outbox rows are
// what the relay's poll would find either way.
func TestEventsAreSentOnceAfterTheirCommit(t *testing.T) {
	db := testenv.DB(t, migrations.Source, outbox.Migrations, inbox.Migrations)
	var mu sync.Mutex
	var sends [][]string
	orders := store.New(db, func(msgs ...outbox.Message) {
		mu.Lock()
		defer mu.Unlock()
		var ids []string
		for _, m := range msgs {
			ids = append(ids, m.ID)
		}
		sends = append(sends, ids)
	})
	ctx := context.Background()
	rows := func() int64 {
		var n int64
		testenv.Must(t, db.Raw("SELECT COUNT(*) FROM local_message").Row().Scan(&n))
		return n
	}
	ev := func(id string) events.Event {
		return events.Event{ID: id, Subject: events.OrderCancelled, Payload: map[string]string{"order_no": id}}
	}
	// Committed with two events: one send of both, after the commit.
	err := orders.InTx(ctx, func(tx order.Tx) error {
		if err := tx.AddEvent(ctx, ev("e1")); err != nil {
			return err
		}
		mu.Lock()
		early := len(sends)
		mu.Unlock()
		if early != 0 {
			t.Error("events sent before their transaction committed")
		}
		return tx.AddEvent(ctx, ev("e2"))
	})
	testenv.Must(t, err)
	// Rolled back: nothing sent, nothing written.
	boom := errors.New("boom")
	if err := orders.InTx(ctx, func(tx order.Tx) error {
		if err := tx.AddEvent(ctx, ev("e3")); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("rolled-back transaction: %v, want its own error", err)
	}
	// No event: nothing sent.
	testenv.Must(t, orders.InTx(ctx, func(order.Tx) error { return nil }))
	mu.Lock()
	defer mu.Unlock()
	if len(sends) != 1 || len(sends[0]) != 2 || sends[0][0] != "e1" || sends[0][1] != "e2" {
		t.Fatalf("sends %v, want one of [e1 e2]", sends)
	}
	if n := rows(); n != 2 {
		t.Fatalf("%d outbox rows, want the committed 2", n)
	}
}
