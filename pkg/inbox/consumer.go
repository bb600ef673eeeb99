package inbox

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/tracing"
)

// Outcome is what the Consumer did with one delivery.
type Outcome string

// Outcomes, also the "outcome" label of inbox_messages_total.
const (
	Processed Outcome = "processed" // effect committed, acked
	Duplicate Outcome = "duplicate" // already processed, acked without effect
	Retry     Outcome = "retry"     // rolled back, nak'd with delay
	Dead      Outcome = "dead"      // terminated and recorded in dead_message
	// Dropped is terminated without a dead_message record: recording it
	// failed on the server's last delivery, after which a nak would not
	// bring it back. The error log holds what a replay by hand needs.
	Dropped Outcome = "dropped"
)

// Consumer is a durable JetStream consumer with a worker pool.
type Consumer struct {
	db   *gorm.DB
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
	// Every outcome of this consumer starts at zero: a counter series born
	// at 1 is invisible to increase() and rate(), so the first dead letter
	// of a process would never fire the alert that watches for it.
	for _, o := range []Outcome{Processed, Duplicate, Retry, Dead, Dropped} {
		m.messages.WithLabelValues(cfg.Name, string(o))
	}
	cc := jetstream.ConsumerConfig{
		Durable:   cfg.Name,
		AckPolicy: jetstream.AckExplicitPolicy,
		AckWait:   cfg.AckWait,
		// One delivery more than the handler gets: if the last allowed
		// delivery times out on AckWait (a hung handler, a crash), the
		// server would stop redelivering with no dead record; the extra
		// delivery records it dead instead (see Process).
		MaxDeliver:    cfg.MaxDeliver + 1,
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
	c := &Consumer{db: db, cons: cons, cfg: cfg, h: h, log: log.With("consumer", cfg.Name), m: m}
	if tracing.Enabled(cfg.TracerProvider) {
		c.tracer = cfg.TracerProvider.Tracer(tracerScope)
	}
	return c, nil
}

// Name is the durable consumer name, also its deduplication scope.
func (c *Consumer) Name() string { return c.cfg.Name }

// Run consumes until ctx ends, then lets in-flight handlers finish.
func (c *Consumer) Run(ctx context.Context) error {
	jobs := make(chan jetstream.Msg)
	// quit ends the workers and unblocks a callback waiting for one. A
	// message dropped that way was never acked: the server redelivers it
	// after AckWait. jobs itself is never closed, so a late callback cannot
	// send on a closed channel.
	quit := make(chan struct{})
	// Handlers run on a context that outlives ctx, so a shutdown lets the
	// transactions in flight commit and ack instead of rolling back.
	hctx := context.WithoutCancel(ctx)
	var wg sync.WaitGroup
	for range c.cfg.Workers {
		wg.Go(func() {
			for {
				select {
				case m := <-jobs:
					c.deliver(hctx, m)
				case <-quit:
					return
				}
			}
		})
	}
	stop := func() {
		close(quit)
		wg.Wait()
	}
	cc, err := c.cons.Consume(func(m jetstream.Msg) {
		select {
		case jobs <- m:
		case <-quit:
		}
	},
		jetstream.PullMaxMessages(2*c.cfg.Workers),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			c.log.Warn("inbox consume error", "err", err)
		}))
	if err != nil {
		stop()
		return fmt.Errorf("inbox: consume %s: %w", c.cfg.Name, err)
	}
	<-ctx.Done()
	// Drain hands the already pulled messages to the workers, then closes.
	cc.Drain()
	select {
	case <-cc.Closed():
	case <-time.After(c.cfg.AckWait):
		cc.Stop()
	}
	stop()
	return nil
}

// deliver converts a JetStream message, processes it and acks accordingly.
func (c *Consumer) deliver(ctx context.Context, jm jetstream.Msg) {
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
			c.ackOutcome(jm, msg, c.bury(ctx, msg, "message has no Nats-Msg-Id header; it cannot be deduplicated"))
			return
		}
	}
	out, err := c.Process(ctx, msg)
	if err != nil && out == Retry {
		c.log.Warn("inbox handler failed; will redeliver", "message_id", msg.ID, "subject", msg.Subject, "delivered", msg.Delivered, "err", err)
	}
	c.ackOutcome(jm, msg, out)
}

func (c *Consumer) ackOutcome(jm jetstream.Msg, msg Message, out Outcome) {
	var err error
	switch out {
	case Processed, Duplicate:
		err = jm.Ack()
	case Retry:
		err = jm.NakWithDelay(c.cfg.nakDelay(msg.Delivered))
	case Dead, Dropped:
		err = jm.Term()
	}
	if err != nil {
		// The server will redeliver after AckWait; the dedup row makes that
		// harmless.
		c.log.Warn("inbox ack failed", "message_id", msg.ID, "outcome", out, "err", err)
	}
}

// Process runs the handler for msg in a transaction with its dedup row and
// reports the outcome (the caller acks). It is what Run does for every
// delivery, exported so tools can replay a message and tests can race
// deliveries of one id. msg.Delivered of 0 counts as the first delivery;
// one beyond MaxDeliver is the extra delivery the server makes after every
// allowed one timed out, which records the message dead without running the
// handler (unless a handler committed it after all).
//
// With tracing on, each call is a span of its own, continuing the trace in
// msg's headers: a redelivery or a republish is a second span beside the
// first, and one the dedup row absorbs says duplicate=true. The handler's
// context carries that span, the trace's baggage, and the request id of the
// request upstream, which its log lines then show.
func (c *Consumer) Process(ctx context.Context, msg Message) (Outcome, error) {
	if msg.Delivered == 0 {
		msg.Delivered = 1
	}
	if c.tracer == nil {
		return c.process(ctx, msg)
	}
	ctx, span := c.startSpan(ctx, msg)
	out, err := c.process(ctx, msg)
	endSpan(span, out, err)
	return out, err
}

func (c *Consumer) process(ctx context.Context, msg Message) (Outcome, error) {
	start := time.Now()
	if msg.ID == "" {
		return c.bury(ctx, msg, "message has no id"), errors.New("inbox: message without id")
	}
	if msg.Delivered > uint64(c.cfg.MaxDeliver) {
		return c.exhausted(ctx, msg)
	}
	errDup := errors.New("duplicate")
	var afterCommit []func()
	hctx := context.WithValue(ctx, onCommitKey{}, &afterCommit)
	err := c.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec("INSERT INTO processed_message (consumer, message_id, processed_at) VALUES (?, ?, ?)",
			c.cfg.Name, msg.ID, time.Now().UTC()).Error; err != nil {
			if database.IsDuplicateKey(err) {
				return errDup
			}
			return fmt.Errorf("record processed message: %w", err)
		}
		return c.h(hctx, tx, msg)
	}, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	c.m.duration.WithLabelValues(c.cfg.Name).Observe(time.Since(start).Seconds())
	switch {
	case err == nil:
		for _, fn := range afterCommit {
			fn()
		}
		return c.count(Processed), nil
	case errors.Is(err, errDup):
		c.log.Debug("inbox duplicate acked without effect", "message_id", msg.ID, "subject", msg.Subject)
		return c.count(Duplicate), nil
	case IsPermanent(err):
		return c.bury(ctx, msg, err.Error()), err
	case msg.Delivered >= uint64(c.cfg.MaxDeliver):
		return c.bury(ctx, msg, fmt.Sprintf("failed on delivery %d of %d: %v", msg.Delivered, c.cfg.MaxDeliver, err)), err
	default:
		return c.count(Retry), err
	}
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
func (c *Consumer) exhausted(ctx context.Context, msg Message) (Outcome, error) {
	var done int64
	if err := c.db.WithContext(ctx).Raw("SELECT COUNT(*) FROM processed_message WHERE consumer = ? AND message_id = ?", c.cfg.Name, msg.ID).Row().Scan(&done); err != nil {
		// Without the answer, recording it dead is the safe side: a dead
		// row for a processed message only costs an operator a look.
		c.log.Warn("inbox could not check an exhausted message for a committed effect", "message_id", msg.ID, "err", err)
	}
	if done > 0 {
		return c.count(Duplicate), nil
	}
	err := fmt.Errorf("deliveries exhausted: none of the %d allowed deliveries ended within AckWait %s (handler hung or process died)", c.cfg.MaxDeliver, c.cfg.AckWait)
	return c.bury(ctx, msg, err.Error()), err
}

// bury records msg in dead_message (once per consumer and id) and returns
// Dead. If that insert fails before the server's last delivery, it returns
// Retry: the nak brings the message back and the next delivery tries again,
// so nothing is dropped while a later delivery can still record it. On the
// last delivery (one beyond MaxDeliver, see Process) the server would not
// redeliver after a nak, so a failed insert returns Dropped instead: the
// message is terminated, honestly counted, and logged at error level with
// its body and headers so an operator can replay it by hand.
func (c *Consumer) bury(ctx context.Context, msg Message, reason string) Outcome {
	headers, _ := json.Marshal(msg.Headers)
	body := msg.Body
	if body == nil {
		body = []byte{}
	}
	err := c.db.WithContext(ctx).Exec(`INSERT INTO dead_message (consumer, message_id, subject, body, headers, reason, deliveries, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE reason = VALUES(reason), deliveries = VALUES(deliveries)`,
		c.cfg.Name, truncate(msg.ID, 128), truncate(msg.Subject, 255), body, string(headers), truncate(reason, 1024), msg.Delivered, time.Now().UTC()).Error
	switch {
	case err == nil:
		c.log.Error("inbox message is dead", "message_id", msg.ID, "subject", msg.Subject, "delivered", msg.Delivered, "reason", reason)
		return c.count(Dead)
	case msg.Delivered <= uint64(c.cfg.MaxDeliver):
		c.log.Error("inbox could not record a dead message; retrying it", "message_id", msg.ID, "reason", reason, "err", err)
		return c.count(Retry)
	default:
		logged := body[:min(len(body), maxLoggedBody)]
		c.log.Error("inbox dropped a message without a dead record: recording it failed on its last delivery; replay it by hand from this log",
			"message_id", msg.ID, "subject", msg.Subject, "delivered", msg.Delivered, "reason", reason, "err", err,
			"headers", string(headers), "body_base64", base64.StdEncoding.EncodeToString(logged),
			"body_bytes", len(body), "body_truncated", len(logged) < len(body))
		return c.count(Dropped)
	}
}

// maxLoggedBody bounds the body a dropped message leaves in the log.
const maxLoggedBody = 64 << 10

func (c *Consumer) count(o Outcome) Outcome {
	c.m.messages.WithLabelValues(c.cfg.Name, string(o)).Inc()
	return o
}

// Cleanup deletes the processed ids older than s.Retention and the dead
// letters older than s.DeadRetention, s.CleanupBatch rows per statement, and
// returns how many of each it deleted. The platform runs it on
// s.CleanupSchedule in every service, so neither table grows without bound.
func Cleanup(ctx context.Context, db *gorm.DB, s Settings) (processed, dead int64, err error) {
	now := time.Now().UTC()
	processed, err = deleteBefore(ctx, db, "processed_message", "processed_at", now.Add(-s.Retention), s.CleanupBatch)
	if err != nil {
		return processed, 0, err
	}
	dead, err = deleteBefore(ctx, db, "dead_message", "created_at", now.Add(-s.DeadRetention), s.CleanupBatch)
	return processed, dead, err
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
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inbox_messages_total", Help: "Deliveries handled by idempotent consumers, by consumer and outcome (processed, duplicate, retry, dead, dropped: terminated without a dead record, see the error log).",
		}, []string{"consumer", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "inbox_handle_duration_seconds", Help: "Time to run a handler and commit its transaction.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}, []string{"consumer"}),
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	if err := reg.Register(m.messages); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			m.messages = are.ExistingCollector.(*prometheus.CounterVec)
		} else {
			errs = append(errs, err)
		}
	}
	if err := reg.Register(m.duration); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			m.duration = are.ExistingCollector.(*prometheus.HistogramVec)
		} else {
			errs = append(errs, err)
		}
	}
	return m, errors.Join(errs...)
}
