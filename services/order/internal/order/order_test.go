package order_test

import (
	"errors"
	"testing"
	"time"

	"github.com/oncemall/oncemall/services/order/internal/order"
)

func TestNewComputesAmountAndValidates(t *testing.T) {
	now := time.Now()
	coupon := uint64(7)
	zero := uint64(0)
	o, err := order.New("O1", 1, []order.Item{{ProductID: 1, Quantity: 2, UnitPrice: 150}, {ProductID: 2, Quantity: 1, UnitPrice: 99}}, 0, &coupon, now)
	if err != nil || o.Amount != 399 || o.Status != order.StatusWaitPay {
		t.Fatalf("items order: %+v %v", o, err)
	}
	if o, err := order.New("O2", 1, nil, 500, nil, now); err != nil || o.Amount != 500 {
		t.Fatalf("amount order: %+v %v", o, err)
	}
	bad := []struct {
		name   string
		user   uint64
		items  []order.Item
		amount int64
		coupon *uint64
	}{
		{"no user", 0, nil, 100, nil},
		{"neither", 1, nil, 0, nil},
		{"both", 1, []order.Item{{1, 1, 1}}, 1, nil},
		{"negative amount", 1, nil, -5, nil},
		{"huge amount", 1, nil, order.MaxAmount + 1, nil},
		{"zero quantity", 1, []order.Item{{1, 0, 1}}, 0, nil},
		{"too many units", 1, []order.Item{{1, order.MaxQuantity + 1, 1}}, 0, nil},
		{"free item", 1, []order.Item{{1, 1, 0}}, 0, nil},
		{"no product", 1, []order.Item{{0, 1, 1}}, 0, nil},
		{"duplicate product", 1, []order.Item{{1, 1, 1}, {1, 2, 1}}, 0, nil},
		{"zero coupon", 1, nil, 100, &zero},
	}
	for _, b := range bad {
		if _, err := order.New("O", b.user, b.items, b.amount, b.coupon, now); !errors.Is(err, order.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", b.name, err)
		}
	}
}

func TestStatusMachine(t *testing.T) {
	cases := []struct {
		from, to order.Status
		ok       bool
	}{
		{order.StatusWaitPay, order.StatusPaid, true},
		{order.StatusWaitPay, order.StatusCancelled, true},
		{order.StatusPaid, order.StatusCancelled, false},
		{order.StatusPaid, order.StatusPaid, false},
		{order.StatusCancelled, order.StatusPaid, false},
		{order.StatusWaitPay, order.StatusWaitPay, false},
	}
	for _, c := range cases {
		if got := c.from.CanBecome(c.to); got != c.ok {
			t.Errorf("%s → %s: %v, want %v", c.from, c.to, got, c.ok)
		}
	}
}

func TestCheckPayment(t *testing.T) {
	o := order.Order{No: "O1", Amount: 100, Status: order.StatusWaitPay}
	if out, err := o.CheckPayment("P1", 100); err != nil || out != order.PayNow {
		t.Fatalf("waiting order: %v %v", out, err)
	}
	if _, err := o.CheckPayment("P1", 99); !errors.Is(err, order.ErrAmountMismatch) {
		t.Fatalf("wrong amount: %v", err)
	}
	o.Status, o.PaymentNo = order.StatusPaid, "P1"
	if out, err := o.CheckPayment("P1", 100); err != nil || out != order.AlreadyPaidBySame {
		t.Fatalf("paid by same: %v %v", out, err)
	}
	if _, err := o.CheckPayment("P2", 100); !errors.Is(err, order.ErrConflict) {
		t.Fatalf("paid by another: %v", err)
	}
	o.Status, o.PaymentNo = order.StatusCancelled, ""
	if _, err := o.CheckPayment("P1", 100); !errors.Is(err, order.ErrConflict) {
		t.Fatalf("cancelled: %v", err)
	}
}

func TestPayMovesAWaitingOrderOnce(t *testing.T) {
	now := time.Now().UTC()
	paidAt := now.Add(-time.Minute)
	o := order.Order{No: "O1", Amount: 100, Status: order.StatusWaitPay}
	if paid, err := o.Pay(order.Payment{No: "P1", Amount: 100, PaidAt: paidAt}, now); err != nil || !paid {
		t.Fatalf("waiting order: %v %v", paid, err)
	}
	if o.Status != order.StatusPaid || o.PaymentNo != "P1" || !o.PaidAt.Equal(paidAt) || !o.UpdatedAt.Equal(now) {
		t.Fatalf("after Pay: %+v", o)
	}
	before := o
	if paid, err := o.Pay(order.Payment{No: "P1", Amount: 100, PaidAt: now}, now.Add(time.Hour)); err != nil || paid || o.UpdatedAt != before.UpdatedAt {
		t.Fatalf("the same payment again: paid=%v err=%v, order %+v; want no change", paid, err, o)
	}
	if paid, err := o.Pay(order.Payment{No: "P2", Amount: 100}, now); !errors.Is(err, order.ErrConflict) || paid || o.PaymentNo != "P1" {
		t.Fatalf("another payment: paid=%v err=%v, order %+v", paid, err, o)
	}
}
