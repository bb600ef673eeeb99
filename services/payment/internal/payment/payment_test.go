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
		"records":  {MultipleRecords: []payment.RecordCount{{OutTradeNo: "P", Records: 2}}},
		"events":   {MissingEvents: []string{"P"}},
		"mismatch": {AmountMismatches: []payment.AmountMismatch{{OutTradeNo: "P"}}},
	} {
		if r.Empty() {
			t.Errorf("a report with %s findings is empty", name)
		}
	}
}
