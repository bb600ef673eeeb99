package jobs_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/oncemall/oncemall/services/payment/internal/jobs"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

type reportFunc func(context.Context) (payment.Report, error)

func (f reportFunc) Reconcile(ctx context.Context) (payment.Report, error) { return f(ctx) }

// TestReconcileSetsFindingsGauges: the job exposes each kind's count, and a
// failed run leaves the last counts in place rather than reporting zero.
func TestReconcileSetsFindingsGauges(t *testing.T) {
	fail := false
	rep := payment.Report{
		MultipleRecords:  []payment.RecordCount{{OutTradeNo: "P1", Records: 3}, {OutTradeNo: "P2", Records: 2}},
		MissingEvents:    []string{"P3"},
		AmountMismatches: nil,
	}
	reg := prometheus.NewRegistry()
	j, err := jobs.NewReconcile(reportFunc(func(context.Context) (payment.Report, error) {
		if fail {
			return payment.Report{}, errors.New("database down")
		}
		return rep, nil
	}), slog.New(slog.DiscardHandler), reg)
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		want := `
# HELP payment_reconcile_findings Findings of the last reconciliation by kind: multiple_records, missing_events, amount_mismatches.
# TYPE payment_reconcile_findings gauge
payment_reconcile_findings{kind="amount_mismatches"} 0
payment_reconcile_findings{kind="missing_events"} 1
payment_reconcile_findings{kind="multiple_records"} 2
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "payment_reconcile_findings"); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
	}
	j.Run()
	check("after a run")
	fail = true
	j.Run()
	check("after a failed run")
}
