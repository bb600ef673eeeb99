package app

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// metrics are the coupon service's business counters.
type metrics struct {
	deductions         *prometheus.CounterVec
	duplicatesAbsorbed prometheus.Counter
	messagesFailed     *prometheus.CounterVec
	messageRetries     prometheus.Counter
	noticesSent        prometheus.Counter
	noticesDeduped     prometheus.Counter
	recordsArchived    prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
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
		noticesSent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "coupon_used_notices_total",
			Help: "coupon.used notifications queued in the outbox.",
		}),
		noticesDeduped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "coupon_used_notices_deduplicated_total",
			Help: "coupon.used notifications skipped because biz_idempotent_record already held their key.",
		}),
		recordsArchived: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "coupon_idempotent_records_archived_total",
			Help: "biz_idempotent_record rows moved to the archive table.",
		}),
	}
	for _, c := range []prometheus.Collector{m.deductions, m.duplicatesAbsorbed, m.messagesFailed, m.messageRetries,
		m.noticesSent, m.noticesDeduped, m.recordsArchived} {
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
	return m, nil
}
