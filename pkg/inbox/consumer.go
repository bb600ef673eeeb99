package inbox

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/database"
	pkgmetrics "github.com/oncemall/oncemall/pkg/metrics"
	"github.com/oncemall/oncemall/pkg/tracing"
)

// Outcome is what the Consumer did with one delivery.
type Outcome string

// Outcomes, also the "outcome" label of inbox_messages_total.
const (
	Processed Outcome = "processed" // effect committed, acked
	Duplicate Outcome = "duplicate" // already processed, acked without effect
	Retry     Outcome = "retry"     // the handler refused: rolled back, counted, nak'd with delay
	Dead      Outcome = "dead"      // terminated and recorded in dead_message
	// Dropped is terminated without a dead_message record: recording it
	// failed on the server's last delivery, after which a nak would not
	// bring it back. The error log holds what a replay by hand needs.
	Dropped Outcome = "dropped"
	// Held is a delivery MySQL could not be reached for: rolled back, not
	// counted as a refusal, and kept by Run until MySQL answers (see
	// Outages in the package doc). A caller of Process tries it again
	// later.
	Held Outcome = "held"
	// Interrupted is a delivery whose connection broke, or whose time ran
	// out, while MySQL still answers: rolled back, not counted as a
	// refusal, nak'd with delay. The server's delivery count bounds it
	// (DeliveryLimit).
	Interrupted Outcome = "interrupted"
)

// Timings of the bookkeeping around a failed delivery and of a pause.
const (
	// recordTimeout bounds each statement recording a refusal or a dead
	// message, which run after the delivery's own time may have run out.
	recordTimeout = 5 * time.Second
	// probeFirst and probeMax bound the jittered backoff of the pings while
	// paused.
	probeFirst = 100 * time.Millisecond
	probeMax   = 5 * time.Second
)

// Consumer is a durable JetStream consumer with a worker pool.
type Consumer struct {
	db   *gorm.DB
	pool *sql.DB // db's pool, for pings
	cons jetstream.Consumer
	cfg  Config
	h    Handler
	log  *slog.Logger
	m    *metrics
	// tracer starts the delivery spans; nil when tracing is off.
	tracer trace.Tracer
}

// NewConsumer declares the durable consumer and returns it. Declaring is
// idempotent (create or update), so every replica does it at start-up; the
// replicas then share the consumer's deliveries.
func NewConsumer(db *gorm.DB, js jetstream.JetStream, cfg Config, h Handler, log *slog.Logger, reg prometheus.Registerer) (*Consumer, error) {
	cfg = cfg.WithDefaults()
	if db == nil || js == nil || h == nil || log == nil {
		return nil, errors.New("inbox: NewConsumer needs a db, a JetStream context, a handler and a logger")
	}
	pool, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("inbox: database pool: %w", err)
	}
	version := ""
	if nc := js.Conn(); nc != nil {
		version = nc.ConnectedServerVersion()
	}
	if err := cfg.Validate(version); err != nil {
		return nil, err
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("inbox: metrics: %w", err)
	}
	// Every series of this consumer starts at zero: a counter series born
	// at 1 is invisible to increase() and rate(), so the first dead letter
	// of a process would never fire the alert that watches for it.
	for _, o := range []Outcome{Processed, Duplicate, Retry, Dead, Dropped, Held, Interrupted} {
		m.messages.WithLabelValues(cfg.Name, string(o))
	}
	m.pauses.WithLabelValues(cfg.Name)
	m.paused.WithLabelValues(cfg.Name).Set(0)
	m.held.WithLabelValues(cfg.Name).Set(0)
	cc := jetstream.ConsumerConfig{
		Durable:   cfg.Name,
		AckPolicy: jetstream.AckExplicitPolicy,
		AckWait:   cfg.AckWait,
		// One delivery more than DeliveryLimit: if the last allowed
		// delivery times out on AckWait (a hung handler, a crash), the
		// server would stop redelivering with no dead record; the extra
		// delivery records it dead instead (see Process).
		MaxDeliver:    cfg.DeliveryLimit + 1,
		MaxAckPending: max(1000, 4*cfg.Workers),
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	switch len(cfg.FilterSubjects) {
	case 0:
	case 1:
		// The single-filter field keeps the consumer usable on 2.9.
		cc.FilterSubject = cfg.FilterSubjects[0]
	default:
		cc.FilterSubjects = cfg.FilterSubjects
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := js.CreateOrUpdateConsumer(ctx, cfg.Stream, cc)
	if err != nil {
		return nil, fmt.Errorf("inbox: declare consumer %s on %s: %w", cfg.Name, cfg.Stream, err)
	}
	c := &Consumer{db: db, pool: pool, cons: cons, cfg: cfg, h: h, log: log.With("consumer", cfg.Name), m: m}
	if tracing.Enabled(cfg.TracerProvider) {
		c.tracer = cfg.TracerProvider.Tracer(tracerScope)
	}
	return c, nil
}

// Name is the durable consumer name, also its deduplication scope.
func (c *Consumer) Name() string { return c.cfg.Name }

// result is the outcome of one delivery and what settling it needs.
type result struct {
	out   Outcome
	err   error
	delay time.Duration // the nak delay of Retry and Interrupted
}

// deliver converts a JetStream message and processes it, giving it
// deliveryTimeout. The caller settles it (settle) or holds it.
func (c *Consumer) deliver(ctx context.Context, jm jetstream.Msg) (Message, result) {
	msg := Message{Subject: jm.Subject(), Body: jm.Data(), Headers: map[string]string{}}
	for k, v := range jm.Headers() {
		if len(v) > 0 {
			msg.Headers[k] = v[0]
		}
	}
	msg.ID = jm.Headers().Get(jetstream.MsgIDHeader)
	if md, err := jm.Metadata(); err == nil {
		msg.Delivered = md.NumDelivered
		if msg.ID == "" {
			// Recorded under the stream sequence so the dead row is unique.
			msg.ID = fmt.Sprintf("seq-%d", md.Sequence.Stream)
			return msg, c.bury(ctx, msg, "message has no Nats-Msg-Id header; it cannot be deduplicated")
		}
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.deliveryTimeout())
	defer cancel()
	r := c.processTraced(ctx, msg)
	if r.out == Retry || r.out == Interrupted {
		c.log.Warn("inbox delivery failed; will redeliver", "message_id", msg.ID, "subject", msg.Subject, "delivered", msg.Delivered, "outcome", r.out, "err", r.err)
	}
	return msg, r
}

// settle acks, naks or terminates jm as r says; Held is not settled (the
// caller keeps the message).
func (c *Consumer) settle(jm jetstream.Msg, msg Message, r result) {
	var err error
	switch r.out {
	case Processed, Duplicate:
		err = jm.Ack()
	case Retry, Interrupted:
		err = jm.NakWithDelay(r.delay)
	case Dead, Dropped:
		err = jm.Term()
	}
	if err != nil {
		// The server will redeliver after AckWait; the dedup row makes that
		// harmless.
		c.log.Warn("inbox ack failed", "message_id", msg.ID, "outcome", r.out, "err", err)
	}
}

// Process runs the handler for msg in a transaction with its dedup row and
// reports the outcome (the caller acks). It is what Run does for every
// delivery, exported so tools can replay a message and tests can race
// deliveries of one id. msg.Delivered of 0 counts as the first delivery;
// one beyond DeliveryLimit is the extra delivery the server makes after
// every allowed one timed out, which records the message dead without
// running the handler (unless a handler committed it after all). Held means
// MySQL could not be reached and nothing was recorded: try again once it
// answers.
//
// With tracing on, each call is a span of its own, continuing the trace in
// msg's headers: a redelivery or a republish is a second span beside the
// first, and one the dedup row absorbs says duplicate=true. The handler's
// context carries that span, the trace's baggage, and the request id of the
// request upstream, which its log lines then show.
func (c *Consumer) Process(ctx context.Context, msg Message) (Outcome, error) {
	r := c.processTraced(ctx, msg)
	return r.out, r.err
}

func (c *Consumer) processTraced(ctx context.Context, msg Message) result {
	if msg.Delivered == 0 {
		msg.Delivered = 1
	}
	if c.tracer == nil {
		return c.process(ctx, msg)
	}
	ctx, span := c.startSpan(ctx, msg)
	r := c.process(ctx, msg)
	endSpan(span, r.out, r.err)
	return r
}

func (c *Consumer) process(ctx context.Context, msg Message) result {
	start := time.Now()
	if msg.ID == "" {
		r := c.bury(ctx, msg, "message has no id")
		r.err = errors.Join(r.err, errors.New("inbox: message without id"))
		return r
	}
	if msg.Delivered > uint64(c.cfg.DeliveryLimit) {
		return c.exhausted(ctx, msg)
	}
	errDup := errors.New("duplicate")
	var afterCommit []func()
	hctx := context.WithValue(ctx, onCommitKey{}, &afterCommit)
	// The pool's connections are READ COMMITTED already (database.Open),
	// so the transaction needs no options, and sends no SET.
	err := c.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec("INSERT INTO processed_message (consumer, message_id, processed_at) VALUES (?, ?, ?)",
			c.cfg.Name, msg.ID, time.Now().UTC()).Error; err != nil {
			if database.IsDuplicateKey(err) {
				return errDup
			}
			return fmt.Errorf("record processed message: %w", err)
		}
		return c.h(hctx, tx, msg)
	})
	c.m.duration.WithLabelValues(c.cfg.Name).Observe(time.Since(start).Seconds())
	switch {
	case err == nil:
		for _, fn := range afterCommit {
			fn()
		}
		return c.counted(Processed, nil)
	case errors.Is(err, errDup):
		c.log.Debug("inbox duplicate acked without effect", "message_id", msg.ID, "subject", msg.Subject)
		return c.counted(Duplicate, nil)
	case IsPermanent(err):
		r := c.bury(ctx, msg, err.Error())
		r.err = errors.Join(err, r.err)
		return r
	}
	switch c.classify(ctx, err) {
	case unreachable:
		return c.counted(Held, err)
	case interrupted:
		r := c.counted(Interrupted, err)
		r.delay = c.cfg.nakDelay(1)
		return r
	}
	return c.refused(ctx, msg, err)
}

// failure is what a failed database operation of a delivery means.
type failure int

const (
	refusal     failure = iota // the handler's own: counted against MaxDeliver
	unreachable                // MySQL cannot be reached: held, not counted
	interrupted                // the connection broke or time ran out, MySQL answers: nak'd, not counted
)

// classify tells what err, from an operation that ran on ctx, means (see
// Outages in the package doc). Only an error that says the connection
// failed, or a deadline that ran out, costs a ping; a refusal costs none.
// A deadline is never the handler's refusal: MySQL may have been slow to
// answer, or the delivery waited on the dedup row of another delivery of
// the same message.
func (c *Consumer) classify(ctx context.Context, err error) failure {
	if !database.IsUnavailable(err) && ctx.Err() == nil {
		return refusal
	}
	if c.ping(ctx) != nil {
		return unreachable
	}
	return interrupted
}

// ping asks MySQL for an answer within the ping timeout, whatever is left
// of ctx's own deadline.
func (c *Consumer) ping(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.pingTimeout())
	defer cancel()
	return c.pool.PingContext(pctx)
}

// recording returns the context a refusal or a dead message is recorded
// on: ctx's values, not its deadline, which may have run out already.
func recording(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
}

// refused counts the handler's refusal of msg (cause) in refused_message,
// and records the message dead if that was its MaxDeliver-th. A refusal
// that cannot be counted because MySQL just became unreachable leaves the
// message held, uncounted: it runs again when MySQL answers. One that cannot
// be counted while MySQL answers (a missing table) is retried on the
// server's count alone, which DeliveryLimit bounds.
func (c *Consumer) refused(ctx context.Context, msg Message, cause error) result {
	rctx, cancel := recording(ctx)
	defer cancel()
	n, err := c.countRefusal(rctx, msg, cause)
	switch {
	case err != nil && c.classify(rctx, err) == unreachable:
		return c.counted(Held, errors.Join(cause, err))
	case err != nil:
		c.log.Error("inbox could not count a refusal; retrying the message on the server's delivery count", "message_id", msg.ID, "delivered", msg.Delivered, "err", err)
		r := c.counted(Retry, errors.Join(cause, err))
		r.delay = c.cfg.nakDelay(int(msg.Delivered))
		return r
	case n >= c.cfg.MaxDeliver:
		r := c.bury(ctx, msg, fmt.Sprintf("refused %d times (MaxDeliver %d), last: %v", n, c.cfg.MaxDeliver, cause))
		r.err = errors.Join(cause, r.err)
		return r
	}
	r := c.counted(Retry, cause)
	r.delay = c.cfg.nakDelay(n)
	return r
}

// countRefusal adds one to msg's refusals and returns the new count.
func (c *Consumer) countRefusal(ctx context.Context, msg Message, cause error) (int, error) {
	db := c.db.WithContext(ctx)
	if err := db.Exec(`INSERT INTO refused_message (consumer, message_id, refusals, reason, refused_at) VALUES (?, ?, 1, ?, ?)
ON DUPLICATE KEY UPDATE refusals = refusals + 1, reason = VALUES(reason), refused_at = VALUES(refused_at)`,
		c.cfg.Name, truncate(msg.ID, 128), truncate(cause.Error(), 1024), time.Now().UTC()).Error; err != nil {
		return 0, fmt.Errorf("count refusal: %w", err)
	}
	var n int
	if err := db.Raw("SELECT refusals FROM refused_message WHERE consumer = ? AND message_id = ?", c.cfg.Name, truncate(msg.ID, 128)).Row().Scan(&n); err != nil {
		return 0, fmt.Errorf("read refusals: %w", err)
	}
	return n, nil
}

// exhausted handles the delivery after the last allowed one, which the
// server makes only when no delivery ended in an ack, nak or term: each one
// timed out on AckWait because the handler hung or the process died. The
// handler does not run again. If a handler did commit the message (its ack
// was lost), it is acked as a duplicate; otherwise it is recorded dead and
// terminated (dropped with an error log if even that record fails, see
// bury). The read takes no lock, so a handler still hanging inside its
// transaction cannot stall it; should that handler commit later, the dead
// row stays, and replaying it is harmless since processed_message dedups.
// An unreachable MySQL holds the message, as for any delivery.
func (c *Consumer) exhausted(ctx context.Context, msg Message) result {
	rctx, cancel := recording(ctx)
	defer cancel()
	var done int64
	if err := c.db.WithContext(rctx).Raw("SELECT COUNT(*) FROM processed_message WHERE consumer = ? AND message_id = ?", c.cfg.Name, msg.ID).Row().Scan(&done); err != nil {
		if c.classify(rctx, err) == unreachable {
			return c.counted(Held, err)
		}
		// Without the answer, recording it dead is the safe side: a dead
		// row for a processed message only costs an operator a look.
		c.log.Warn("inbox could not check an exhausted message for a committed effect", "message_id", msg.ID, "err", err)
	}
	if done > 0 {
		return c.counted(Duplicate, nil)
	}
	err := fmt.Errorf("deliveries exhausted: none of the %d allowed deliveries ended within AckWait %s (handler hung, process died, or connections lost)", c.cfg.DeliveryLimit, c.cfg.AckWait)
	r := c.bury(ctx, msg, err.Error())
	r.err = errors.Join(err, r.err)
	return r
}

// bury records msg in dead_message (once per consumer and id), forgets its
// refusals, and returns Dead. If MySQL cannot be reached it returns Held,
// as for any delivery. If the insert fails while MySQL answers, before the
// server's last delivery, it returns Retry: the nak brings the message back
// and the next delivery tries again, so nothing is dropped while a later
// delivery can still record it. On the last delivery (one beyond
// DeliveryLimit, see Process) the server would not redeliver after a nak,
// so it returns Dropped instead: the message is terminated, honestly
// counted, and logged at error level with its body and headers so an
// operator can replay it by hand.
func (c *Consumer) bury(ctx context.Context, msg Message, reason string) result {
	rctx, cancel := recording(ctx)
	defer cancel()
	headers, _ := json.Marshal(msg.Headers)
	body := msg.Body
	if body == nil {
		body = []byte{}
	}
	err := c.db.WithContext(rctx).Exec(`INSERT INTO dead_message (consumer, message_id, subject, body, headers, reason, deliveries, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE reason = VALUES(reason), deliveries = VALUES(deliveries)`,
		c.cfg.Name, truncate(msg.ID, 128), truncate(msg.Subject, 255), body, string(headers), truncate(reason, 1024), msg.Delivered, time.Now().UTC()).Error
	switch {
	case err == nil:
		c.log.Error("inbox message is dead", "message_id", msg.ID, "subject", msg.Subject, "delivered", msg.Delivered, "reason", reason)
		// A replay of the dead message starts with no refusals; a row left
		// behind only waits for the cleanup job.
		if ferr := c.db.WithContext(rctx).Exec("DELETE FROM refused_message WHERE consumer = ? AND message_id = ?", c.cfg.Name, truncate(msg.ID, 128)).Error; ferr != nil {
			c.log.Warn("inbox could not forget a dead message's refusals", "message_id", msg.ID, "err", ferr)
		}
		return c.counted(Dead, nil)
	case c.classify(rctx, err) == unreachable:
		return c.counted(Held, err)
	case msg.Delivered <= uint64(c.cfg.DeliveryLimit):
		c.log.Error("inbox could not record a dead message; retrying it", "message_id", msg.ID, "reason", reason, "err", err)
		r := c.counted(Retry, err)
		r.delay = c.cfg.nakDelay(int(msg.Delivered))
		return r
	default:
		logged := body[:min(len(body), maxLoggedBody)]
		c.log.Error("inbox dropped a message without a dead record: recording it failed on its last delivery; replay it by hand from this log",
			"message_id", msg.ID, "subject", msg.Subject, "delivered", msg.Delivered, "reason", reason, "err", err,
			"headers", string(headers), "body_base64", base64.StdEncoding.EncodeToString(logged),
			"body_bytes", len(body), "body_truncated", len(logged) < len(body))
		return c.counted(Dropped, err)
	}
}

// maxLoggedBody bounds the body a dropped message leaves in the log.
const maxLoggedBody = 64 << 10

// counted counts outcome o of a delivery that ended with err.
func (c *Consumer) counted(o Outcome, err error) result {
	c.m.messages.WithLabelValues(c.cfg.Name, string(o)).Inc()
	return result{out: o, err: err}
}

// Cleaned counts the rows a Cleanup deleted, by table.
type Cleaned struct {
	Processed, Refused, Dead int64
}

// Cleanup deletes the processed ids and refusal counts older than
// s.Retention and the dead letters older than s.DeadRetention,
// s.CleanupBatch rows per statement, and returns how many of each it
// deleted. The platform runs it on s.CleanupSchedule in every service, so no
// table grows without bound.
func Cleanup(ctx context.Context, db *gorm.DB, s Settings) (Cleaned, error) {
	now := time.Now().UTC()
	var n Cleaned
	var err error
	if n.Processed, err = deleteBefore(ctx, db, "processed_message", "processed_at", now.Add(-s.Retention), s.CleanupBatch); err != nil {
		return n, err
	}
	if n.Refused, err = deleteBefore(ctx, db, "refused_message", "refused_at", now.Add(-s.Retention), s.CleanupBatch); err != nil {
		return n, err
	}
	n.Dead, err = deleteBefore(ctx, db, "dead_message", "created_at", now.Add(-s.DeadRetention), s.CleanupBatch)
	return n, err
}

// CleanupProcessed deletes processed_message rows older than olderThan, in
// batches of batch rows, and returns how many it deleted. Keep rows longer
// than any duplicate can arrive (see the package doc).
func CleanupProcessed(ctx context.Context, db *gorm.DB, olderThan time.Duration, batch int) (int64, error) {
	return deleteBefore(ctx, db, "processed_message", "processed_at", time.Now().UTC().Add(-olderThan), batch)
}

// deleteBefore deletes table's rows whose column is before cutoff, batch rows
// per statement so that no statement holds its locks for long.
func deleteBefore(ctx context.Context, db *gorm.DB, table, column string, cutoff time.Time, batch int) (int64, error) {
	var total int64
	for {
		res := db.WithContext(ctx).Exec("DELETE FROM "+table+" WHERE "+column+" < ? ORDER BY "+column+" LIMIT ?", cutoff, batch)
		if res.Error != nil {
			return total, fmt.Errorf("inbox cleanup of %s: %w", table, res.Error)
		}
		total += res.RowsAffected
		if res.RowsAffected < int64(batch) {
			return total, nil
		}
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

type metrics struct {
	messages *prometheus.CounterVec
	duration *prometheus.HistogramVec
	pauses   *prometheus.CounterVec
	paused   *prometheus.GaugeVec
	held     *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	// Every consumer of a service shares the vectors, one series per
	// consumer.
	s := pkgmetrics.NewSet(reg)
	m := &metrics{
		messages: s.Counters("inbox_messages_total", "Deliveries handled by idempotent consumers, by consumer and outcome (processed, duplicate, retry: the handler refused, dead, dropped: terminated without a dead record, see the error log; held: MySQL unreachable, kept until it answers; interrupted: the connection broke, redelivered).",
			"consumer", "outcome"),
		duration: s.Histograms("inbox_handle_duration_seconds", "Time to run a handler and commit its transaction.",
			prometheus.ExponentialBuckets(0.001, 2, 14), "consumer"),
		pauses: s.Counters("inbox_pauses_total", "Times a consumer paused because MySQL could not be reached.", "consumer"),
		paused: s.Gauges("inbox_paused", "1 while a consumer is paused: MySQL cannot be reached, so it pulls nothing and holds its deliveries.", "consumer"),
		held:   s.Gauges("inbox_held_messages", "Deliveries a paused consumer holds (kept alive with InProgress) until MySQL answers.", "consumer"),
	}
	return m, s.Err()
}
