package httpapi

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncemall/oncemall/pkg/metrics"
)

// newCallbackCounter registers payment_callbacks_total on reg.
func newCallbackCounter(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	return metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "payment_callbacks_total",
		Help: "Platform payment notifications by handler (fixed, broken) and outcome (processed, duplicate, refunding, bad_signature, stale_timestamp, malformed, unknown_payment, amount_mismatch, conflict, locked, error).",
	}, []string{"handler", "outcome"}))
}

// newRefundCallbackCounter registers payment_refund_callbacks_total on reg.
func newRefundCallbackCounter(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	return metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "payment_refund_callbacks_total",
		Help: "Platform refund notifications by outcome (processed, duplicate, bad_signature, stale_timestamp, malformed, unknown_refund, amount_mismatch, conflict, error).",
	}, []string{"outcome"}))
}
