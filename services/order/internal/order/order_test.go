package order_test

import (
	"errors"
	"testing"
	"time"

	"github.com/oncemall/oncemall/services/order/internal/order"
)

func TestCheckLines(t *testing.T) {
	if err := order.CheckLines([]order.Line{{ProductID: 1, Quantity: 1}, {ProductID: 2, Quantity: order.MaxQuantity}}); err != nil {
		t.Fatalf("valid lines: %v", err)
	}
	tooMany := make([]order.Line, order.MaxItems+1)
	for i := range tooMany {
		tooMany[i] = order.Line{ProductID: uint64(i + 1), Quantity: 1}
	}
	for name, lines := range map[string][]order.Line{
		"none":              nil,
		"too many":          tooMany,
		"zero quantity":     {{ProductID: 1, Quantity: 0}},
		"negative quantity": {{ProductID: 1, Quantity: -1}},
		"1000 units":        {{ProductID: 1, Quantity: order.MaxQuantity + 1}},
		"no product":        {{ProductID: 0, Quantity: 1}},
		"duplicate product": {{ProductID: 1, Quantity: 1}, {ProductID: 1, Quantity: 2}},
	} {
		if err := order.CheckLines(lines); !errors.Is(err, order.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

func TestPriceSnapshotsTheCatalog(t *testing.T) {
	catalog := map[uint64]order.CatalogEntry{
		1: {ProductID: 1, Name: "Kettle", Price: 2500},
		2: {ProductID: 2, Name: "Lamp", Price: 999},
	}
	items, err := order.Price([]order.Line{{ProductID: 2, Quantity: 3}, {ProductID: 1, Quantity: 2}}, catalog)
	if err != nil {
		t.Fatal(err)
	}
	want := []order.Item{{ProductID: 2, Name: "Lamp", UnitPrice: 999, Quantity: 3}, {ProductID: 1, Name: "Kettle", UnitPrice: 2500, Quantity: 2}}
	if len(items) != 2 || items[0] != want[0] || items[1] != want[1] || order.Total(items) != 7997 {
		t.Fatalf("items %+v total %d", items, order.Total(items))
	}
	for name, c := range map[string]map[uint64]order.CatalogEntry{
		"unknown or deleted": {1: catalog[1]},
		"free":               {1: catalog[1], 2: {ProductID: 2, Name: "Lamp", Price: 0}},
		"beyond the limit":   {1: catalog[1], 2: {ProductID: 2, Name: "Lamp", Price: order.MaxUnitPrice + 1}},
	} {
		if _, err := order.Price([]order.Line{{ProductID: 1, Quantity: 1}, {ProductID: 2, Quantity: 1}}, c); !errors.Is(err, order.ErrProductUnavailable) {
			t.Errorf("%s: %v, want ErrProductUnavailable", name, err)
		}
	}

	if err := order.CheckPrices(items, catalog); err != nil {
		t.Fatalf("unchanged catalog: %v", err)
	}
	repriced := map[uint64]order.CatalogEntry{1: catalog[1], 2: {ProductID: 2, Name: "Lamp", Price: 1099}}
	if err := order.CheckPrices(items, repriced); !errors.Is(err, order.ErrPriceChanged) {
		t.Fatalf("repriced: %v, want ErrPriceChanged", err)
	}
	renamed := map[uint64]order.CatalogEntry{1: catalog[1], 2: {ProductID: 2, Name: "Desk lamp", Price: 999}}
	if err := order.CheckPrices(items, renamed); !errors.Is(err, order.ErrPriceChanged) {
		t.Fatalf("renamed: %v, want ErrPriceChanged", err)
	}
	if err := order.CheckPrices(items, map[uint64]order.CatalogEntry{1: catalog[1]}); !errors.Is(err, order.ErrProductUnavailable) {
		t.Fatalf("deleted meanwhile: %v, want ErrProductUnavailable", err)
	}
}

func TestNewComputesTheAmounts(t *testing.T) {
	now := time.Now()
	coupon := uint64(7)
	zero := uint64(0)
	items := []order.Item{{ProductID: 1, Name: "Kettle", UnitPrice: 150, Quantity: 2}, {ProductID: 2, Name: "Lamp", UnitPrice: 99, Quantity: 1}}
	o, err := order.New("O1", 1, items, &coupon, 100, now)
	if err != nil || o.TotalAmount != 399 || o.DiscountAmount != 100 || o.PayAmount != 299 || o.Status != order.StatusWaitPay {
		t.Fatalf("order with coupon: %+v %v", o, err)
	}
	if o, err := order.New("O2", 1, items, nil, 0, now); err != nil || o.PayAmount != 399 || o.DiscountAmount != 0 {
		t.Fatalf("order without coupon: %+v %v", o, err)
	}
	bad := []struct {
		name     string
		user     uint64
		items    []order.Item
		coupon   *uint64
		discount int64
	}{
		{"no user", 0, items, nil, 0},
		{"no items", 1, nil, nil, 0},
		{"zero coupon", 1, items, &zero, 0},
		{"discount without coupon", 1, items, nil, 10},
		{"negative discount", 1, items, &coupon, -1},
		{"free order", 1, items, &coupon, 399},
		{"discount above total", 1, items, &coupon, 500},
	}
	for _, b := range bad {
		if _, err := order.New("O", b.user, b.items, b.coupon, b.discount, now); !errors.Is(err, order.ErrInvalid) {
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

func TestCheckPaymentComparesThePayAmount(t *testing.T) {
	o := order.Order{No: "O1", TotalAmount: 150, DiscountAmount: 50, PayAmount: 100, Status: order.StatusWaitPay}
	if out, err := o.CheckPayment("P1", 100); err != nil || out != order.PayNow {
		t.Fatalf("waiting order: %v %v", out, err)
	}
	if _, err := o.CheckPayment("P1", 150); !errors.Is(err, order.ErrAmountMismatch) {
		t.Fatalf("the total instead of the pay amount: %v", err)
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
	o := order.Order{No: "O1", PayAmount: 100, Status: order.StatusWaitPay}
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

func TestCancelMovesAWaitingOrderOnce(t *testing.T) {
	now := time.Now().UTC()
	o := order.Order{No: "O1", Status: order.StatusWaitPay}
	if changed, err := o.Cancel(order.ReasonTimeout, now); err != nil || !changed {
		t.Fatalf("waiting order: %v %v", changed, err)
	}
	if o.Status != order.StatusCancelled || o.CancelReason != order.ReasonTimeout || !o.CancelledAt.Equal(now) {
		t.Fatalf("after Cancel: %+v", o)
	}
	if changed, err := o.Cancel(order.ReasonCustomer, now.Add(time.Hour)); err != nil || changed || o.CancelReason != order.ReasonTimeout {
		t.Fatalf("cancel again: %v %v %+v; want no change", changed, err, o)
	}
	paid := order.Order{No: "O2", Status: order.StatusPaid}
	if changed, err := paid.Cancel(order.ReasonCustomer, now); !errors.Is(err, order.ErrConflict) || changed || paid.Status != order.StatusPaid {
		t.Fatalf("cancel a paid order: %v %v %+v", changed, err, paid)
	}
	waiting := order.Order{No: "O3", Status: order.StatusWaitPay}
	if _, err := waiting.Cancel("bored", now); !errors.Is(err, order.ErrInvalid) || waiting.Status != order.StatusWaitPay {
		t.Fatalf("unknown reason: %v %+v", err, waiting)
	}
}

func TestByProductSortsWithoutTouchingTheInput(t *testing.T) {
	lines := []order.Line{{ProductID: 9, Quantity: 1}, {ProductID: 2, Quantity: 2}, {ProductID: 5, Quantity: 3}}
	got := order.ByProduct(lines)
	if got[0].ProductID != 2 || got[1].ProductID != 5 || got[2].ProductID != 9 || lines[0].ProductID != 9 {
		t.Fatalf("sorted %v, input %v", got, lines)
	}
}
