package httpapi

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	callbacks *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		callbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payment_callbacks_total",
			Help: "Platform notifications by handler (fixed, broken) and outcome (processed, duplicate, bad_signature, stale_timestamp, malformed, unknown_payment, amount_mismatch, conflict, locked, error).",
		}, []string{"handler", "outcome"}),
	}
	if err := reg.Register(m.callbacks); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return nil, err
		}
		m.callbacks = are.ExistingCollector.(*prometheus.CounterVec)
	}
	return m, nil
}
