package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
	"github.com/oncemall/oncemall/services/payment/internal/store"
	paymentlab "github.com/oncemall/oncemall/services/payment/lab"
)

// TestStateUpdatesReadByKey: every move of a payment or a refund finds its
// row by its unique key. Read through idx_payments_status_created instead
// (MariaDB's own plan on a small table like this one), a close racing the
// customer's notification deadlocked and the close answered 500; see
// database.ByKey. MariaDB is asked for the plan of each statement the store
// really sent.
func TestStateUpdatesReadByKey(t *testing.T) {
	ctx := context.Background()
	db := testenv.DB(t, paymentlab.Migrations...)
	rdb, rec := testenv.RecordSQL(db)
	s := store.New(rdb, func(...outbox.Message) {})
	for _, no := range []string{"P1", "P2", "P3"} {
		_, _, err := s.Create(ctx, payment.Payment{OutTradeNo: no, OrderNo: "O" + no, UserID: 1, Amount: 100, Status: payment.StatusWaitPay})
		testenv.Must(t, err)
	}
	now := time.Now().UTC()
	paid := func(no string) payment.Transaction {
		return payment.Transaction{Channel: "pspsim", PlatformSerial: "T" + no, OutTradeNo: no, Amount: 100, PaidAt: now}
	}
	refundNo := payment.RefundNoFor("P1")
	ok := func(moved bool, err error) {
		t.Helper()
		testenv.Must(t, err)
		if !moved {
			t.Fatal("a move changed nothing")
		}
	}
	testenv.Must(t, s.MarkQueried(ctx, "P2", now))
	ok(s.MarkClosed(ctx, "P1"))
	testenv.Must(t, s.InTx(ctx, func(tx payment.Tx) error {
		ok(tx.MarkPaid(ctx, paid("P2")))
		ok(tx.MarkRefunding(ctx, paid("P1")))
		return tx.InsertRefund(ctx, payment.Refund{RefundNo: refundNo, OutTradeNo: "P1", OrderNo: "OP1", Amount: 100, Channel: "pspsim"})
	}))
	testenv.Must(t, s.RefundFailed(ctx, refundNo, now, "platform down"))
	_, claimed, err := s.ClaimRefund(ctx, now.Add(time.Second), time.Minute)
	ok(claimed, err)
	ok(s.RefundSubmitted(ctx, refundNo, "RS1", now))
	testenv.Must(t, s.InTx(ctx, func(tx payment.Tx) error {
		ok(tx.MarkRefundDone(ctx, payment.RefundResult{Channel: "pspsim", RefundSerial: "RS1", RefundNo: refundNo, OutTradeNo: "P1", Amount: 100, RefundedAt: now}))
		ok(tx.MarkRefunded(ctx, "P1", now))
		return nil
	}))
	testenv.RequireKeyed(t, db, rec.Take("UPDATE"), 9)
}
