package jobs_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/services/payment/internal/jobs"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

type reportFunc func(context.Context) (payment.Report, error)

func (f reportFunc) Reconcile(ctx context.Context) (payment.Report, error) { return f(ctx) }

// TestReconcileAlertsOnFindings: the job is the platform.Job the service
// declares; a run with findings logs the alert with each kind's count, a
// clean run logs nothing, and a failed run returns its error for the
// platform to log and count.
func TestReconcileAlertsOnFindings(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	var rep payment.Report
	var fail error
	j := jobs.Reconcile(reportFunc(func(context.Context) (payment.Report, error) { return rep, fail }), "@every 1m", log)
	if j.Name == "" || j.Schedule != "@every 1m" || j.EveryReplica {
		t.Fatalf("job %+v: want a named job on the schedule, on one replica at a time", j)
	}

	if err := j.Run(context.Background()); err != nil || logs.Len() != 0 {
		t.Fatalf("clean run: err %v, logged %q; want neither", err, logs.String())
	}
	rep = payment.Report{MultipleRecords: []payment.RecordCount{{OutTradeNo: "P1", Records: 3}}, MissingEvents: []string{"P2", "P3"}}
	if err := j.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"alert":"payment_reconcile"`, `"multiple_records":1`, `"missing_events":2`, `"amount_mismatches":0`,
		`"paid_cancelled_without_refund":0`, `"late_refunds":0`, `"stale_wait_pay":0`, `"missing_refund_events":0`} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("alert %q lacks %s", logs.String(), want)
		}
	}
	fail = errors.New("database down")
	if err := j.Run(context.Background()); !errors.Is(err, fail) {
		t.Fatalf("failed run: %v, want the use case's error", err)
	}
}
