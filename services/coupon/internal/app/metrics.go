package app

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	pkgmetrics "github.com/oncemall/oncemall/pkg/metrics"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// The outcomes of a lock request besides its refusal reasons (the
// outcome label of coupon_lock_requests_total).
const (
	lockLocked   = "locked"
	lockSameLock = "same_lock"
)

// Who released a lock (the by label of coupon_lock_releases_total).
const (
	releasedByCall      = "release_call"
	releasedByCancelled = "order_cancelled"
	releasedBySweep     = "sweep"
)

// What the sweeper did with an overdue lock (the decision label of
// coupon_sweep_decisions_total).
const (
	sweepReleased    = "released"
	sweepKept        = "kept"
	sweepUnreachable = "unreachable"
	sweepBadAnswer   = "bad_answer"
)

// metrics are the coupon service's business counters, and the gauge of the
// last reconciliation.
type metrics struct {
	lockRequests       *prometheus.CounterVec
	lockReleases       *prometheus.CounterVec
	leftToSibling      prometheus.Counter
	sweepDecisions     *prometheus.CounterVec
	findings           *prometheus.GaugeVec
	deductions         *prometheus.CounterVec
	duplicatesAbsorbed prometheus.Counter
	messagesFailed     *prometheus.CounterVec
	messageRetries     prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	s := pkgmetrics.NewSet(reg)
	m := &metrics{
		lockRequests: s.Counters("coupon_lock_requests_total",
			"Lock requests by outcome: locked, same_lock (a retry of the holder), or the refusal reason.", "outcome"),
		lockReleases: s.Counters("coupon_lock_releases_total",
			"Locks released back to UNUSED, by who released them: release_call, order_cancelled, sweep.", "by"),
		leftToSibling: s.Counter("coupon_lock_releases_left_to_sibling_total",
			"Release calls that left the lock LOCKED because another attempt of the same order still holds it."),
		sweepDecisions: s.Counters("coupon_sweep_decisions_total",
			"Overdue locks the sweeper looked at, by decision: released, kept, unreachable (order service down), bad_answer.", "decision"),
		findings: s.Gauges("coupon_reconcile_findings", "Findings of the last reconciliation by kind.", "kind"),
		deductions: s.Counters("coupon_deductions_total",
			"Coupon deductions written to the ledger, by code path (fixed or broken).", "mode"),
		duplicatesAbsorbed: s.Counter("coupon_deduction_duplicates_absorbed_total",
			"Deduction attempts that found the coupon already used by the same order and succeeded without effect."),
		messagesFailed: s.Counters("coupon_messages_failed_total", "Local messages moved to FAILED, by reason.", "reason"),
		messageRetries: s.Counter("coupon_message_retries_scheduled_total", "Transient deduction failures that scheduled a retry."),
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("coupon metrics: %w", err)
	}
	// Every known label value reads 0 from the start, so that
	// increase(coupon_messages_failed_total[5m]) on a healthy service is 0,
	// not "no data".
	modes := make([]string, len(DeductionModes))
	for i, mode := range DeductionModes {
		modes[i] = string(mode)
	}
	kinds := make([]string, len(coupon.AnomalyKinds))
	for i, kind := range coupon.AnomalyKinds {
		kinds[i] = string(kind)
	}
	pkgmetrics.Zero(m.deductions.WithLabelValues, modes...)
	pkgmetrics.Zero(m.messagesFailed.WithLabelValues, coupon.FailureReasons()...)
	pkgmetrics.Zero(m.lockRequests.WithLabelValues, append([]string{lockLocked, lockSameLock}, coupon.RefusalReasons()...)...)
	pkgmetrics.Zero(m.lockReleases.WithLabelValues, releasedByCall, releasedByCancelled, releasedBySweep)
	pkgmetrics.Zero(m.sweepDecisions.WithLabelValues, sweepReleased, sweepKept, sweepUnreachable, sweepBadAnswer)
	pkgmetrics.Zero(m.findings.WithLabelValues, kinds...)
	return m, nil
}
