package idempotency

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncemall/oncemall/pkg/metrics"
)

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

func newMetrics(reg prometheus.Registerer) (*counters, error) {
	s := metrics.NewSet(reg)
	m := &counters{
		requests: s.Counters("idempotency_requests_total",
			"Requests through the Idempotency-Key middleware, by outcome (first, replayed, conflict, mismatch, missing, invalid).", "outcome"),
		fallbacks: s.Counter("idempotency_redis_fallbacks_total", "Requests decided on the database alone because the Redis entry layer failed."),
		released:  s.Counter("idempotency_claims_released_total", "Keys given back after a transient failure (5xx, panic, timeout) so a retry runs again."),
		lost:      s.Counter("idempotency_claims_lost_total", "Requests that finished after their claim was taken over by a retry."),
	}
	// Zeros from the start, so rates work before the first request.
	metrics.Zero(m.requests.WithLabelValues, outcomeFirst, outcomeReplayed, outcomeConflict, outcomeMismatch, outcomeMissing, outcomeInvalid)
	return m, s.Err()
}
