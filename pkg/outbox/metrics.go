package outbox

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	published        prometheus.Counter
	claimed          prometheus.Counter
	eagerPublished   prometheus.Counter
	eagerSkipped     *prometheus.CounterVec
	eagerFailed      prometheus.Counter
	settleStatements prometheus.Counter
	duplicates       prometheus.Counter
	retries          prometheus.Counter
	failed           prometheus.Counter
	deferred         prometheus.Counter
	outageSkips      prometheus.Counter
	redriven         prometheus.Counter
	cleaned          prometheus.Counter
	pending          prometheus.Gauge
	failedRows       prometheus.Gauge
	oldestAge        prometheus.Gauge
	batch            prometheus.Histogram
}

func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

func gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		published:        counter("outbox_published_total", "Outbox messages acknowledged by JetStream and marked sent, by Send or the claim path (its rate is published/s)."),
		claimed:          counter("outbox_claimed_total", "Rows claimed by the claim path (the poll, Wake, PublishBatch): the safety net, near zero while Send publishes what is committed."),
		eagerPublished:   counter("outbox_eager_published_total", "Messages Send published on commit and JetStream acknowledged."),
		eagerFailed:      counter("outbox_eager_failed_total", "Publishes on commit that failed (no PubAck in time, an error from the stream); the rows stay as committed, and the poll publishes them after the hand-off."),
		settleStatements: counter("outbox_eager_settle_statements_total", "UPDATE statements that marked messages Send published sent; over outbox_eager_published_total, the statements per event."),
		eagerSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "outbox_eager_skipped_total",
			Help: "Messages Send did not publish, by reason: queue_full (Send's queue), late (waited in the queue until the poll may take them), unavailable (NATS or JetStream known down), stopped (the relay was not running), no_id. The poll publishes them after the hand-off.",
		}, []string{"reason"}),
		duplicates:  counter("outbox_publish_duplicates_total", "Publishes JetStream dropped as duplicates of a message already in its window (a republish after a crash)."),
		retries:     counter("outbox_publish_retries_total", "Failed publish attempts rescheduled with backoff."),
		failed:      counter("outbox_failed_total", "Messages that exhausted their retries and were marked failed (they wait for a redrive)."),
		deferred:    counter("outbox_outage_deferrals_total", "Claimed messages whose publish an outage cut off (the NATS connection dropped mid-batch, or JetStream stopped answering), deferred without spending a retry."),
		outageSkips: counter("outbox_outage_skips_total", "Relay polls that claimed nothing because NATS was not connected or JetStream did not answer; pending rows stay untouched, their retries unspent."),
		redriven:    counter("outbox_redriven_total", "Failed messages put back to pending by a redrive."),
		cleaned:     counter("outbox_cleaned_total", "Sent messages deleted by the retention job."),
		pending:     gauge("outbox_pending_messages", "Messages waiting to be published (the backlog), sampled by the poll job."),
		failedRows:  gauge("outbox_failed_messages", "Messages marked failed and not yet redriven (dead letters waiting for an operator), sampled by the poll job."),
		oldestAge:   gauge("outbox_oldest_pending_age_seconds", "Age of the oldest pending message, sampled by the poll job."),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "outbox_batch_duration_seconds", Help: "Time from claiming a batch to committing its outcome.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
	}
	var errs []error
	reuse := func(p any) {
		switch v := p.(type) {
		case *prometheus.Counter:
			*v, errs = registerOrReuse(reg, *v, errs)
		case *prometheus.Gauge:
			*v, errs = registerOrReuse(reg, *v, errs)
		case *prometheus.Histogram:
			*v, errs = registerOrReuse(reg, *v, errs)
		case **prometheus.CounterVec:
			*v, errs = registerOrReuse(reg, *v, errs)
		}
	}
	for _, p := range []any{&m.published, &m.claimed, &m.eagerPublished, &m.eagerSkipped, &m.eagerFailed, &m.settleStatements, &m.duplicates, &m.retries, &m.failed, &m.deferred, &m.outageSkips, &m.redriven, &m.cleaned, &m.pending, &m.failedRows, &m.oldestAge, &m.batch} {
		reuse(p)
	}
	for _, reason := range []string{skipQueueFull, skipLate, skipUnavailable, skipStopped, skipNoID} {
		m.eagerSkipped.WithLabelValues(reason)
	}
	return m, errors.Join(errs...)
}

// registerOrReuse registers c on reg, or returns the collector already
// registered under the same description, so several relays in one process
// (the benchmark, a test restarting a relay) share one registry. A nil reg
// registers nothing.
func registerOrReuse[C prometheus.Collector](reg prometheus.Registerer, c C, errs []error) (C, []error) {
	if reg == nil {
		return c, errs
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, errs
			}
		}
		return c, append(errs, err)
	}
	return c, errs
}
