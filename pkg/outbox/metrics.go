package outbox

import (
	"github.com/prometheus/client_golang/prometheus"

	pkgmetrics "github.com/oncemall/oncemall/pkg/metrics"
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

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	// Several relays in one process (the benchmark, a test restarting a
	// relay) share the registry's collectors.
	s := pkgmetrics.NewSet(reg)
	m := &metrics{
		published:        s.Counter("outbox_published_total", "Outbox messages acknowledged by JetStream and marked sent, by Send or the claim path (its rate is published/s)."),
		claimed:          s.Counter("outbox_claimed_total", "Rows claimed by the claim path (the poll, Wake, PublishBatch): the safety net, near zero while Send publishes what is committed."),
		eagerPublished:   s.Counter("outbox_eager_published_total", "Messages Send published on commit and JetStream acknowledged."),
		eagerFailed:      s.Counter("outbox_eager_failed_total", "Publishes on commit that failed (no PubAck in time, an error from the stream); the rows stay as committed, and the poll publishes them after the hand-off."),
		settleStatements: s.Counter("outbox_eager_settle_statements_total", "UPDATE statements that marked messages Send published sent; over outbox_eager_published_total, the statements per event."),
		eagerSkipped: s.Counters("outbox_eager_skipped_total",
			"Messages Send did not publish, by reason: queue_full (Send's queue), late (waited in the queue until the poll may take them), unavailable (NATS or JetStream known down), stopped (the relay was not running), no_id. The poll publishes them after the hand-off.", "reason"),
		duplicates:  s.Counter("outbox_publish_duplicates_total", "Publishes JetStream dropped as duplicates of a message already in its window (a republish after a crash)."),
		retries:     s.Counter("outbox_publish_retries_total", "Failed publish attempts rescheduled with backoff."),
		failed:      s.Counter("outbox_failed_total", "Messages that exhausted their retries and were marked failed (they wait for a redrive)."),
		deferred:    s.Counter("outbox_outage_deferrals_total", "Claimed messages whose publish an outage cut off (the NATS connection dropped mid-batch, or JetStream stopped answering), deferred without spending a retry."),
		outageSkips: s.Counter("outbox_outage_skips_total", "Relay polls that claimed nothing because NATS was not connected or JetStream did not answer; pending rows stay untouched, their retries unspent."),
		redriven:    s.Counter("outbox_redriven_total", "Failed messages put back to pending by a redrive."),
		cleaned:     s.Counter("outbox_cleaned_total", "Sent messages deleted by the retention job."),
		pending:     s.Gauge("outbox_pending_messages", "Messages waiting to be published (the backlog), sampled by the poll job."),
		failedRows:  s.Gauge("outbox_failed_messages", "Messages marked failed and not yet redriven (dead letters waiting for an operator), sampled by the poll job."),
		oldestAge:   s.Gauge("outbox_oldest_pending_age_seconds", "Age of the oldest pending message, sampled by the poll job."),
		batch: s.Histogram("outbox_batch_duration_seconds", "Time from claiming a batch to committing its outcome.",
			prometheus.ExponentialBuckets(0.001, 2, 14)),
	}
	pkgmetrics.Zero(m.eagerSkipped.WithLabelValues, skipQueueFull, skipLate, skipUnavailable, skipStopped, skipNoID)
	return m, s.Err()
}
