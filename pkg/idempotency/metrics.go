package idempotency

import "github.com/prometheus/client_golang/prometheus"

// Request outcomes counted by idempotency_requests_total.
const (
	outcomeFirst    = "first"    // the key was claimed and the handler ran
	outcomeReplayed = "replayed" // a stored response was replayed
	outcomeConflict = "conflict" // 409: the key is being processed
	outcomeMismatch = "mismatch" // 422: the key was used with another body
	outcomeMissing  = "missing"  // 400: no Idempotency-Key
	outcomeInvalid  = "invalid"  // 400: malformed key or caller
)

type counters struct {
	requests  *prometheus.CounterVec
	fallbacks prometheus.Counter
	released  prometheus.Counter
	lost      prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *counters {
	m := &counters{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idempotency_requests_total",
			Help: "Requests through the Idempotency-Key middleware, by outcome (first, replayed, conflict, mismatch, missing, invalid).",
		}, []string{"outcome"}),
		fallbacks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "idempotency_redis_fallbacks_total",
			Help: "Requests decided on the database alone because the Redis entry layer failed.",
		}),
		released: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "idempotency_claims_released_total",
			Help: "Keys given back after a transient failure (5xx, panic, timeout) so a retry runs again.",
		}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "idempotency_claims_lost_total",
			Help: "Requests that finished after their claim was taken over by a retry.",
		}),
	}
	for _, o := range []string{outcomeFirst, outcomeReplayed, outcomeConflict, outcomeMismatch, outcomeMissing, outcomeInvalid} {
		m.requests.WithLabelValues(o) // export zeros, so rates work from the start
	}
	reg.MustRegister(m.requests, m.fallbacks, m.released, m.lost)
	return m
}
