package app_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/oncemall/oncemall/services/payment/internal/app"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// reconcileStore is a payment.Store whose Reconcile answers what the test
// says; the use case under test calls nothing else.
type reconcileStore struct {
	payment.Store
	reconcile func(q payment.ReconcileQuery) (payment.Report, error)
}

func (s reconcileStore) Reconcile(_ context.Context, q payment.ReconcileQuery) (payment.Report, error) {
	return s.reconcile(q)
}

// TestReconcileSetsFindingsGauges: each run exposes every kind's count (a
// kind without findings as 0, so an alert rule always has a series), a
// failed run leaves the last counts in place rather than reporting zero, and
// the store is asked for the configured lookback, refund bound and query
// horizon.
func TestReconcileSetsFindingsGauges(t *testing.T) {
	fail := false
	rep := payment.Report{
		MultipleRecords:  []payment.RecordCount{{OutTradeNo: "P1", Records: 3}, {OutTradeNo: "P2", Records: 2}},
		MissingEvents:    []string{"P3"},
		AmountMismatches: nil,
		PaidCancelled:    []string{"P4", "P5", "P6"},
		LateRefunds:      []payment.LateRefund{{RefundNo: "RP7"}},
		StaleWaitPay:     []string{"P8", "P9", "P10", "P11"},
	}
	var asked payment.ReconcileQuery
	st := reconcileStore{reconcile: func(q payment.ReconcileQuery) (payment.Report, error) {
		asked = q
		if fail {
			return payment.Report{}, errors.New("database down")
		}
		return rep, nil
	}}
	reg := prometheus.NewRegistry()
	a, err := app.New(app.Deps{Store: st, Log: slog.New(slog.DiscardHandler), Registry: reg}, app.Config{ReconcileLookback: time.Hour,
		RefundAlertAfter: 20 * time.Minute, QueryAfter: time.Minute, QueryHorizon: 40 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		want := `
# HELP payment_reconcile_findings Findings of the last reconciliation by kind: multiple_records, missing_events, amount_mismatches, paid_cancelled_without_refund, late_refunds, stale_wait_pay, missing_refund_events.
# TYPE payment_reconcile_findings gauge
payment_reconcile_findings{kind="amount_mismatches"} 0
payment_reconcile_findings{kind="late_refunds"} 1
payment_reconcile_findings{kind="missing_events"} 1
payment_reconcile_findings{kind="missing_refund_events"} 0
payment_reconcile_findings{kind="multiple_records"} 2
payment_reconcile_findings{kind="paid_cancelled_without_refund"} 3
payment_reconcile_findings{kind="stale_wait_pay"} 4
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "payment_reconcile_findings"); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
	}
	if _, err := a.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	check("after a run")
	near := func(what string, at time.Time, want time.Duration) {
		t.Helper()
		if ago := time.Since(at); ago < want-time.Minute || ago > want+time.Minute {
			t.Fatalf("%s %v ago, want %v", what, ago, want)
		}
	}
	near("reconciled since", asked.Since, time.Hour)
	near("refunds late if created before", asked.RefundsBefore, 20*time.Minute)
	near("waiting payments stale if created before", asked.WaitPayBefore, 40*time.Minute)
	if asked.Limit <= 0 {
		t.Fatalf("asked with limit %d", asked.Limit)
	}
	fail = true
	if _, err := a.Reconcile(context.Background()); err == nil {
		t.Fatal("a failed reconciliation returned no error")
	}
	check("after a failed run")
}

// TestNewRefusesWhatCannotRun: the entry lock
// without a lock client, and a query horizon no longer than the query
// delay, are refused at construction rather than on the first use.
func TestNewRefusesWhatCannotRun(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for name, cfg := range map[string]app.Config{
		"lock without locks": {CallbackLock: true},
		"horizon not after":  {QueryAfter: time.Hour, QueryHorizon: time.Hour},
	} {
		if _, err := app.New(app.Deps{Store: reconcileStore{}, Log: log, Registry: prometheus.NewRegistry()}, cfg); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
}
