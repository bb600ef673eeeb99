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

	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/payment/internal/app"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// reconcileStore is a payment.Store whose Reconcile answers what the test
// says; the use case under test calls nothing else.
type reconcileStore struct {
	payment.Store
	reconcile func(since time.Time, limit int) (payment.Report, error)
}

func (s reconcileStore) Reconcile(_ context.Context, since time.Time, limit int) (payment.Report, error) {
	return s.reconcile(since, limit)
}

// TestReconcileSetsFindingsGauges: each run exposes each kind's count, a
// failed run leaves the last counts in place rather than reporting zero, and
// the store is asked for the configured lookback.
func TestReconcileSetsFindingsGauges(t *testing.T) {
	fail := false
	rep := payment.Report{
		MultipleRecords:  []payment.RecordCount{{OutTradeNo: "P1", Records: 3}, {OutTradeNo: "P2", Records: 2}},
		MissingEvents:    []string{"P3"},
		AmountMismatches: nil,
	}
	var asked time.Time
	st := reconcileStore{reconcile: func(since time.Time, _ int) (payment.Report, error) {
		asked = since
		if fail {
			return payment.Report{}, errors.New("database down")
		}
		return rep, nil
	}}
	reg := prometheus.NewRegistry()
	a, err := app.New(st, nil, nil, nil, app.Config{Callback: variant.Fixed, ReconcileLookback: time.Hour}, slog.New(slog.DiscardHandler), reg)
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
	if _, err := a.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	check("after a run")
	if ago := time.Since(asked); ago < time.Hour-time.Minute || ago > time.Hour+time.Minute {
		t.Fatalf("reconciled since %v ago, want the configured hour", ago)
	}
	fail = true
	if _, err := a.Reconcile(context.Background()); err == nil {
		t.Fatal("a failed reconciliation returned no error")
	}
	check("after a failed run")
}

// TestNewRefusesWhatCannotRun: an unknown callback mode, and the entry lock
// without a lock client, are refused at construction rather than on the
// first notification.
func TestNewRefusesWhatCannotRun(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for name, cfg := range map[string]app.Config{
		"unknown mode":       {Callback: "lenient"},
		"lock without locks": {Callback: variant.Fixed, CallbackLock: true},
	} {
		if _, err := app.New(reconcileStore{}, nil, nil, nil, cfg, log, prometheus.NewRegistry()); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
}
