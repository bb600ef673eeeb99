package jobs_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/services/order/internal/app"
	"github.com/oncemall/oncemall/services/order/internal/jobs"
	"github.com/oncemall/oncemall/services/order/internal/order"
)

type closeFunc func(context.Context) (app.CloseReport, error)

func (f closeFunc) CloseExpired(ctx context.Context) (app.CloseReport, error) { return f(ctx) }

type reconcileFunc func(context.Context) ([]order.Anomaly, error)

func (f reconcileFunc) Reconcile(ctx context.Context) ([]order.Anomaly, error) { return f(ctx) }

// TestCloseJob: the order-close job is a named job on its schedule, on one
// replica at a time; a pass that found expired orders logs what it did, an
// idle one logs nothing, and a failed pass returns its error for the
// platform to log and count.
func TestCloseJob(t *testing.T) {
	var logs bytes.Buffer
	var rep app.CloseReport
	var fail error
	j := jobs.Close(closeFunc(func(context.Context) (app.CloseReport, error) { return rep, fail }), "@every 5s", slog.New(slog.NewJSONHandler(&logs, nil)))
	if j.Name != "order-close" || j.Schedule != "@every 5s" || j.EveryReplica {
		t.Fatalf("job %+v", j)
	}
	if err := j.Run(context.Background()); err != nil || logs.Len() != 0 {
		t.Fatalf("idle pass: %v, logged %q", err, logs.String())
	}
	rep = app.CloseReport{Expired: 4, Cancelled: 2, Paid: 1, Failed: 1}
	fail = errors.New("payment service down")
	if err := j.Run(context.Background()); !errors.Is(err, fail) {
		t.Fatalf("failed pass: %v", err)
	}
	for _, want := range []string{`"expired":4`, `"cancelled":2`, `"paid":1`, `"failed":1`} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("log %q lacks %s", logs.String(), want)
		}
	}
}

// TestReconcileJob: the order-reconcile job logs an alert with each kind's
// count when the reconciler finds something, nothing when it is clean, and
// returns a failed run's error.
func TestReconcileJob(t *testing.T) {
	var logs bytes.Buffer
	var found []order.Anomaly
	var fail error
	j := jobs.Reconcile(reconcileFunc(func(context.Context) ([]order.Anomaly, error) { return found, fail }), "@every 1m", slog.New(slog.NewJSONHandler(&logs, nil)))
	if j.Name != "order-reconcile" || j.Schedule != "@every 1m" || j.EveryReplica {
		t.Fatalf("job %+v", j)
	}
	if err := j.Run(context.Background()); err != nil || logs.Len() != 0 {
		t.Fatalf("clean run: %v, logged %q", err, logs.String())
	}
	found = []order.Anomaly{{Kind: order.AnomalyPaidUnconfirmedStock}, {Kind: order.AnomalyPaidUnconfirmedStock}, {Kind: order.AnomalyDeadPayment}}
	if err := j.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"alert":"order_reconcile"`, `"findings":3`, `"paid_order_with_unconfirmed_reservation":2`, `"payment_succeeded_dead_lettered":1`, `"cancelled_order_with_unreleased_reservation":0`} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("alert %q lacks %s", logs.String(), want)
		}
	}
	fail = errors.New("database down")
	if err := j.Run(context.Background()); !errors.Is(err, fail) {
		t.Fatalf("failed run: %v", err)
	}
}
