package httpapi

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncemall/oncemall/pkg/metrics"
)

// newCallbackCounter registers payment_callbacks_total on reg.
func newCallbackCounter(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	return metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "payment_callbacks_total",
		Help: "Platform notifications by handler (fixed, broken) and outcome (processed, duplicate, bad_signature, stale_timestamp, malformed, unknown_payment, amount_mismatch, conflict, locked, error).",
	}, []string{"handler", "outcome"}))
}
