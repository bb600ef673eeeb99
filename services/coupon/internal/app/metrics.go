package app

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

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
	m := &metrics{
		lockRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coupon_lock_requests_total",
			Help: "Lock requests by outcome: locked, same_lock (a retry of the holder), or the refusal reason.",
		}, []string{"outcome"}),
		lockReleases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coupon_lock_releases_total",
			Help: "Locks released back to UNUSED, by who released them: release_call, order_cancelled, sweep.",
		}, []string{"by"}),
		leftToSibling: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "coupon_lock_releases_left_to_sibling_total",
			Help: "Release calls that left the lock LOCKED because another attempt of the same order still holds it.",
		}),
		sweepDecisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coupon_sweep_decisions_total",
			Help: "Overdue locks the sweeper looked at, by decision: released, kept, unreachable (order service down), bad_answer.",
		}, []string{"decision"}),
		findings: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "coupon_reconcile_findings",
			Help: "Findings of the last reconciliation by kind.",
		}, []string{"kind"}),
		deductions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coupon_deductions_total",
			Help: "Coupon deductions written to the ledger, by code path (fixed or broken).",
		}, []string{"mode"}),
		duplicatesAbsorbed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "coupon_deduction_duplicates_absorbed_total",
			Help: "Deduction attempts that found the coupon already used by the same order and succeeded without effect.",
		}),
		messagesFailed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coupon_messages_failed_total",
			Help: "Local messages moved to FAILED, by reason.",
		}, []string{"reason"}),
		messageRetries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "coupon_message_retries_scheduled_total",
			Help: "Transient deduction failures that scheduled a retry.",
		}),
	}
	for _, c := range []prometheus.Collector{m.lockRequests, m.lockReleases, m.leftToSibling, m.sweepDecisions, m.findings, m.deductions, m.duplicatesAbsorbed, m.messagesFailed, m.messageRetries} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register coupon metrics: %w", err)
		}
	}
	// A labelled counter has no series until its first event, so a
	// dashboard or an alert such as increase(coupon_messages_failed_total[5m])
	// would see "no data" instead of 0 on a healthy service. Every known
	// label value is created at zero up front.
	for _, mode := range DeductionModes {
		m.deductions.WithLabelValues(string(mode))
	}
	for _, reason := range coupon.FailureReasons() {
		m.messagesFailed.WithLabelValues(reason)
	}
	for _, outcome := range append([]string{lockLocked, lockSameLock}, coupon.RefusalReasons()...) {
		m.lockRequests.WithLabelValues(outcome)
	}
	for _, by := range []string{releasedByCall, releasedByCancelled, releasedBySweep} {
		m.lockReleases.WithLabelValues(by)
	}
	for _, d := range []string{sweepReleased, sweepKept, sweepUnreachable, sweepBadAnswer} {
		m.sweepDecisions.WithLabelValues(d)
	}
	for _, kind := range coupon.AnomalyKinds {
		m.findings.WithLabelValues(string(kind)).Set(0)
	}
	return m, nil
}
