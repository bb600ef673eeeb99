// Package jobs holds the payment service's scheduled jobs; they are thin and
// call the app.
package jobs

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/robfig/cron/v3"

	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// Reconciler is the use case the job runs.
type Reconciler interface {
	Reconcile(ctx context.Context) (payment.Report, error)
}

// Reconcile runs the reconciliation on a schedule, logs what it finds as an
// alert and exposes the counts as payment_reconcile_findings{kind}, which an
// alert rule can watch (anything above zero is an incident).
type Reconcile struct {
	r        Reconciler
	log      *slog.Logger
	findings *prometheus.GaugeVec
	timeout  time.Duration
}

// NewReconcile returns the job; Schedule adds it to a cron.
func NewReconcile(r Reconciler, log *slog.Logger, reg prometheus.Registerer) (*Reconcile, error) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "payment_reconcile_findings",
		Help: "Findings of the last reconciliation by kind: multiple_records, missing_events, amount_mismatches.",
	}, []string{"kind"})
	if err := reg.Register(g); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return nil, err
		}
		g = are.ExistingCollector.(*prometheus.GaugeVec)
	}
	return &Reconcile{r: r, log: log, findings: g, timeout: 30 * time.Second}, nil
}

// Schedule adds the job to c under spec.
func (j *Reconcile) Schedule(c *cron.Cron, spec string) error {
	_, err := c.AddFunc(spec, j.Run)
	return err
}

// Run reconciles once.
func (j *Reconcile) Run() {
	ctx, cancel := context.WithTimeout(context.Background(), j.timeout)
	defer cancel()
	rep, err := j.r.Reconcile(ctx)
	if err != nil {
		j.log.Error("reconciliation failed", "err", err)
		return
	}
	j.findings.WithLabelValues("multiple_records").Set(float64(len(rep.MultipleRecords)))
	j.findings.WithLabelValues("missing_events").Set(float64(len(rep.MissingEvents)))
	j.findings.WithLabelValues("amount_mismatches").Set(float64(len(rep.AmountMismatches)))
	if !rep.Empty() {
		j.log.Error("reconciliation found inconsistent payments", "alert", "payment_reconcile",
			"multiple_records", len(rep.MultipleRecords), "missing_events", len(rep.MissingEvents), "amount_mismatches", len(rep.AmountMismatches))
	}
}
