package jobs_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/services/payment/internal/app"
	"github.com/oncemall/oncemall/services/payment/internal/jobs"
)

type queryFunc func(context.Context) (app.QueryReport, error)

func (f queryFunc) QueryPayments(ctx context.Context) (app.QueryReport, error) { return f(ctx) }

type refundFunc func(context.Context) (app.RefundReport, error)

func (f refundFunc) SendRefunds(ctx context.Context) (app.RefundReport, error) { return f(ctx) }

// TestQueryAndRefundJobs: both are named jobs on their schedule, on one
// replica at a time; a run that did something logs what, an idle run logs
// nothing, and a run's error is returned for the platform to log and count
// (after logging what the run did before it failed).
func TestQueryAndRefundJobs(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	var queried app.QueryReport
	var sent app.RefundReport
	var fail error
	q := jobs.Query(queryFunc(func(context.Context) (app.QueryReport, error) { return queried, fail }), "@every 30s", log)
	r := jobs.Refund(refundFunc(func(context.Context) (app.RefundReport, error) { return sent, fail }), "@every 5s", log)
	if q.Name != "payment-query" || q.Schedule != "@every 30s" || q.EveryReplica {
		t.Fatalf("query job %+v", q)
	}
	if r.Name != "payment-refund" || r.Schedule != "@every 5s" || r.EveryReplica {
		t.Fatalf("refund job %+v", r)
	}
	for _, j := range []func(context.Context) error{q.Run, r.Run} {
		if err := j(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if logs.Len() != 0 {
		t.Fatalf("idle runs logged %q", logs.String())
	}
	queried, sent = app.QueryReport{Asked: 3, Paid: 1, Failed: 1}, app.RefundReport{Sent: 2, Failed: 1}
	fail = errors.New("platform down")
	for _, j := range []func(context.Context) error{q.Run, r.Run} {
		if err := j(context.Background()); !errors.Is(err, fail) {
			t.Fatalf("failed run: %v, want the use case's error", err)
		}
	}
	for _, want := range []string{`"msg":"waiting payments queried","asked":3,"paid":1,"failed":1`, `"msg":"refund requests sent","accepted":2,"failed":1`} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("logs %q lack %s", logs.String(), want)
		}
	}
}
