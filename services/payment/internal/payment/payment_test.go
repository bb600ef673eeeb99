package payment_test

import (
	"testing"

	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

func TestPaidBy(t *testing.T) {
	paid := payment.Payment{Status: payment.StatusPaid, Channel: "pspsim", PlatformSerial: "T1"}
	tests := []struct {
		name            string
		p               payment.Payment
		channel, serial string
		want            bool
	}{
		{"paid by this transaction", paid, "pspsim", "T1", true},
		{"paid by another serial", paid, "pspsim", "T2", false},
		{"same serial on another channel", paid, "other", "T1", false},
		{"waiting, serial not yet recorded", payment.Payment{Status: payment.StatusWaitPay}, "pspsim", "", false},
		{"closed", payment.Payment{Status: payment.StatusClosed, Channel: "pspsim", PlatformSerial: "T1"}, "pspsim", "T1", false},
		// A payment that landed after its order closed was paid by it too:
		// a copy of its notification is a duplicate.
		{"refunding, paid by this transaction", payment.Payment{Status: payment.StatusRefunding, Channel: "pspsim", PlatformSerial: "T1"}, "pspsim", "T1", true},
		{"refunded, paid by this transaction", payment.Payment{Status: payment.StatusRefunded, Channel: "pspsim", PlatformSerial: "T1"}, "pspsim", "T1", true},
		{"refunding, another serial", payment.Payment{Status: payment.StatusRefunding, Channel: "pspsim", PlatformSerial: "T1"}, "pspsim", "T2", false},
	}
	for _, tt := range tests {
		if got := tt.p.PaidBy(tt.channel, tt.serial); got != tt.want {
			t.Errorf("%s: PaidBy = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestReportEmpty(t *testing.T) {
	if !(payment.Report{}).Empty() {
		t.Fatal("a report with no findings is not empty")
	}
	for name, r := range map[string]payment.Report{
		"records":        {MultipleRecords: []payment.RecordCount{{OutTradeNo: "P", Records: 2}}},
		"events":         {MissingEvents: []string{"P"}},
		"mismatch":       {AmountMismatches: []payment.AmountMismatch{{OutTradeNo: "P"}}},
		"paid cancelled": {PaidCancelled: []string{"P"}},
		"late refunds":   {LateRefunds: []payment.LateRefund{{RefundNo: "RP"}}},
		"stale waiting":  {StaleWaitPay: []string{"P"}},
		"refund events":  {MissingRefundEvents: []string{"P"}},
	} {
		if r.Empty() {
			t.Errorf("a report with %s findings is empty", name)
		}
	}
	// Every kind is counted under its name, and only the kinds are.
	counts := (payment.Report{}).Counts()
	if len(counts) != len(payment.Kinds) {
		t.Fatalf("Counts has %d kinds, Kinds %d", len(counts), len(payment.Kinds))
	}
	for _, k := range payment.Kinds {
		if _, ok := counts[k]; !ok {
			t.Errorf("kind %s is not counted", k)
		}
	}
}

func TestClosed(t *testing.T) {
	for status, want := range map[payment.Status]bool{
		payment.StatusWaitPay: false, payment.StatusPaid: false,
		payment.StatusClosed: true, payment.StatusRefunding: true, payment.StatusRefunded: true,
	} {
		if got := (payment.Payment{Status: status}).Closed(); got != want {
			t.Errorf("%s: Closed = %v, want %v", status, got, want)
		}
	}
	first, again, other := payment.RefundNoFor("P1"), payment.RefundNoFor("P1"), payment.RefundNoFor("P2")
	if first != again || first == other {
		t.Fatal("a payment's refund number must be one, and its own")
	}
}
