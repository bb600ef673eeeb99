package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"
)

// Relay publishes pending local_message rows to JetStream.
type Relay struct {
	db   *gorm.DB
	js   jetstream.JetStream
	cfg  Config
	log  *slog.Logger
	m    *metrics
	wake chan struct{}
	// outage is what the workers know of a NATS or JetStream outage.
	outage outageState
}

// NewRelay returns a relay over db's local_message table. cfg's zero fields
// take their defaults; reg may be nil (no metrics exported).
func NewRelay(db *gorm.DB, js jetstream.JetStream, cfg Config, log *slog.Logger, reg prometheus.Registerer) (*Relay, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if db == nil || js == nil || log == nil {
		return nil, errors.New("outbox: NewRelay needs a db, a JetStream context and a logger")
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("outbox: metrics: %w", err)
	}
	return &Relay{db: db, js: js, cfg: cfg, log: log, m: m, wake: make(chan struct{}, 1)}, nil
}

// Config returns the relay's effective configuration (defaults filled).
func (r *Relay) Config() Config { return r.cfg }

// Wake makes the relay poll at once; call it after committing a transaction
// that called Add. It never blocks.
func (r *Relay) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run publishes until ctx ends. It claims a batch whenever it is woken (by
// Wake or the cron poll) and keeps claiming while batches come back full.
// When ctx ends, batches already claimed are still published and committed
// (bounded by PublishTimeout), so a shutdown does not turn into a
// republish; then Run returns nil.
func (r *Relay) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for range r.cfg.Workers {
		wg.Go(func() { r.loop(ctx) })
	}
	r.Wake() // rows committed while no relay was running
	wg.Wait()
	return nil
}

func (r *Relay) loop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		}
		for ctx.Err() == nil {
			n, err := r.PublishBatch(ctx)
			if err != nil {
				r.log.Warn("outbox batch failed; rows stay pending", "err", err)
				break
			}
			if n < r.cfg.BatchSize {
				break
			}
		}
	}
}

// claimed is one locked local_message row.
type claimed struct {
	ID         uint64
	MessageNo  string
	Topic      string
	Body       []byte
	Headers    sql.NullString
	RetryCount int
}

// claimSQL selects due rows and locks them, skipping rows another relay
// holds. The values are formatted into the statement (they are ours: a
// timestamp and an int) so the driver sends one text query instead of a
// prepare, execute and close: three round trips on the hot path.
const claimSQL = `SELECT id, message_no, topic, body, headers, retry_count
FROM local_message
WHERE status = 'pending' AND next_retry_time <= '%s'
ORDER BY next_retry_time
LIMIT %d
FOR UPDATE SKIP LOCKED`

const sqlTime = "2006-01-02 15:04:05.000000"

// PublishBatch claims up to BatchSize due rows, publishes them, waits for
// the PubAcks and records the outcome, all in one transaction. It returns
// how many rows it claimed. During an outage (NATS not connected, JetStream
// not answering) it claims nothing and returns 0 without touching a row.
// Run calls it; it is exported for tools and tests that drive a relay step
// by step.
func (r *Relay) PublishBatch(ctx context.Context) (int, error) {
	// A batch claimed during an outage could only be written back with an
	// error and a delay, batch after batch for as long as it lasts, and the
	// delay would hold the rows back once it is over. Left untouched, they
	// keep their retries and go at the first poll that finds NATS back.
	if cause := r.unavailable(ctx); cause != "" {
		r.pause(cause)
		return 0, nil
	}
	r.resume()
	// The batch finishes even if ctx ends meanwhile: rolling back after the
	// PubAcks would only cause a republish.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*r.cfg.PublishTimeout+30*time.Second)
	defer cancel()
	start := time.Now()
	tx := r.db.WithContext(bctx).Begin(&sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if tx.Error != nil {
		return 0, fmt.Errorf("begin claim: %w", tx.Error)
	}
	committed := false
	defer func() {
		if !committed {
			tx.Rollback()
		}
	}()
	var rows []claimed
	if err := tx.Raw(fmt.Sprintf(claimSQL, time.Now().UTC().Format(sqlTime), r.cfg.BatchSize)).Scan(&rows).Error; err != nil {
		return 0, fmt.Errorf("claim: %w", err)
	}
	if len(rows) == 0 {
		return 0, nil
	}
	claimedAt := time.Now()
	if len(rows) == r.cfg.BatchSize {
		// More is probably due: let another worker claim the next batch
		// while this one is on the wire.
		r.Wake()
	}

	pubErrs := r.publish(bctx, rows)
	publishedAt := time.Now()

	// Each row was sent, or its publish was cut off by an outage (deferred,
	// its retries kept), or it failed and spends a retry (see classify).
	var sent, deferred []uint64
	var sentNos []string
	var failedRows []int
	var firstRetryErr, firstDeferErr error
	lookups := map[string]error{}
	for i, perr := range pubErrs {
		row := rows[i]
		if perr == nil {
			sent = append(sent, row.ID)
			sentNos = append(sentNos, row.MessageNo)
			continue
		}
		deferrable, reason := r.classify(bctx, r.cfg.SubjectPrefix+row.Topic, perr, lookups)
		pubErrs[i] = reason
		if deferrable {
			deferred = append(deferred, row.ID)
			if firstDeferErr == nil {
				firstDeferErr = reason
			}
			continue
		}
		failedRows = append(failedRows, i)
		if firstRetryErr == nil {
			firstRetryErr = reason
		}
	}
	if r.cfg.AfterPublish != nil && len(sentNos) > 0 {
		if err := r.cfg.AfterPublish(bctx, sentNos); err != nil {
			return len(rows), fmt.Errorf("after publish: %w", err)
		}
	}
	now := time.Now().UTC()
	if len(sent) > 0 {
		if err := allRows(tx.Exec(markSentSQL(now, sent)), len(sent)); err != nil {
			return len(rows), fmt.Errorf("mark %d sent: %w", len(sent), err)
		}
	}
	if len(deferred) > 0 {
		// Nothing reached a stream, so the retry budget, which bounds the
		// failures of a message, stays as it is. The short delay only keeps
		// the next polls from claiming the rows again before they notice
		// the outage and pause; last_error is the batch's first deferral.
		res := tx.Exec("UPDATE local_message SET next_retry_time = ?, last_error = ?, updated_at = ? WHERE status = 'pending' AND id IN "+idList(deferred),
			now.Add(r.backoff(1)), truncate(firstDeferErr.Error(), 512), now)
		if err := allRows(res, len(deferred)); err != nil {
			return len(rows), fmt.Errorf("defer %d: %w", len(deferred), err)
		}
	}
	var retried, failed int
	for _, i := range failedRows {
		row, perr := rows[i], pubErrs[i]
		retry := row.RetryCount + 1
		status, next := StatusPending, now.Add(r.backoff(retry))
		if retry >= r.cfg.MaxRetries {
			status, next = StatusFailed, now
		}
		res := tx.Exec("UPDATE local_message SET status = ?, retry_count = ?, next_retry_time = ?, last_error = ?, updated_at = ? WHERE id = ? AND status = 'pending'",
			status, retry, next, truncate(perr.Error(), 512), now, row.ID)
		if err := allRows(res, 1); err != nil {
			return len(rows), fmt.Errorf("reschedule %s: %w", row.MessageNo, err)
		}
		if status == StatusFailed {
			failed++
			r.log.Error("outbox message failed after max retries; redrive it once the cause is fixed",
				"message_no", row.MessageNo, "subject", row.Topic, "retries", retry, "err", perr)
		} else {
			retried++
		}
	}
	if err := tx.Commit().Error; err != nil {
		return len(rows), fmt.Errorf("commit batch: %w", err)
	}
	committed = true
	r.log.Debug("outbox batch", "claimed", len(rows), "sent", len(sent), "retried", retried, "failed", failed, "deferred", len(deferred),
		"claim", claimedAt.Sub(start), "publish", publishedAt.Sub(claimedAt), "mark_commit", time.Since(publishedAt))
	r.m.published.Add(float64(len(sent)))
	r.m.retries.Add(float64(retried))
	r.m.failed.Add(float64(failed))
	r.m.deferred.Add(float64(len(deferred)))
	r.m.batch.Observe(time.Since(start).Seconds())
	if retried > 0 {
		r.log.Warn("outbox publishes failed; rescheduled with backoff", "count", retried, "first_err", firstRetryErr)
	}
	if len(deferred) > 0 {
		r.log.Warn("an outage cut outbox publishes off; rows deferred, their retries untouched", "count", len(deferred), "first_err", firstDeferErr)
	}
	return len(rows), nil
}

// markSentSQL is the batch mark-sent UPDATE as one text statement (see
// claimSQL for why the values are inlined).
func markSentSQL(now time.Time, ids []uint64) string {
	ts := now.Format(sqlTime)
	return "UPDATE local_message SET status = 'sent', sent_at = '" + ts + "', updated_at = '" + ts + "', last_error = NULL WHERE status = 'pending' AND id IN " + idList(ids)
}

// idList formats ids as an SQL list, "(1,2,3)"; they are integers we read,
// safe to inline.
func idList(ids []uint64) string {
	var sb strings.Builder
	sb.WriteByte('(')
	for i, id := range ids {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.FormatUint(id, 10))
	}
	sb.WriteByte(')')
	return sb.String()
}

// publish sends rows asynchronously and waits for their PubAcks; the result
// has one error (nil = stored) per row.
func (r *Relay) publish(ctx context.Context, rows []claimed) []error {
	errs := make([]error, len(rows))
	if nc := r.js.Conn(); nc != nil && !nc.IsConnected() {
		// The connection dropped since PublishBatch looked. Publishing now
		// would only fill the client's reconnect buffer and time out; fail
		// the batch fast: it is deferred, and the next polls pause.
		for i := range errs {
			errs[i] = fmt.Errorf("%w (%s)", errNotConnected, nc.Status())
		}
		return errs
	}
	futures := make([]jetstream.PubAckFuture, len(rows))
	for i, row := range rows {
		msg := nats.NewMsg(r.cfg.SubjectPrefix + row.Topic)
		msg.Data = row.Body
		if row.Headers.Valid && row.Headers.String != "" {
			var h map[string]string
			if err := json.Unmarshal([]byte(row.Headers.String), &h); err != nil {
				errs[i] = fmt.Errorf("decode stored headers: %w", err)
				continue
			}
			for k, v := range h {
				msg.Header.Set(k, v)
			}
		}
		msg.Header.Set(jetstream.MsgIDHeader, row.MessageNo)
		f, err := r.js.PublishMsgAsync(msg)
		if err != nil {
			errs[i] = fmt.Errorf("publish: %w", err)
			continue
		}
		futures[i] = f
	}
	deadline := time.NewTimer(r.cfg.PublishTimeout)
	defer deadline.Stop()
	expired := false
	for i, f := range futures {
		if f == nil {
			continue
		}
		if expired {
			select {
			case ack := <-f.Ok():
				r.acked(ack)
			case err := <-f.Err():
				errs[i] = err
			default:
				errs[i] = errors.New("no PubAck within the publish timeout")
			}
			continue
		}
		select {
		case ack := <-f.Ok():
			r.acked(ack)
		case err := <-f.Err():
			errs[i] = err
		case <-deadline.C:
			expired = true
			errs[i] = errors.New("no PubAck within the publish timeout")
		case <-ctx.Done():
			expired = true
			errs[i] = ctx.Err()
		}
	}
	return errs
}

func (r *Relay) acked(ack *jetstream.PubAck) {
	if ack != nil && ack.Duplicate {
		r.m.duplicates.Inc()
	}
}

// backoff is the delay before the attempt after failed attempt number
// retry: the capped exponential ceiling, of which the upper half is random
// ("equal jitter") so replicas that failed together do not retry together.
func (r *Relay) backoff(retry int) time.Duration {
	d := r.cfg.backoffCeiling(retry)
	half := d / 2
	return half + rand.N(half+1)
}

// allRows checks that a conditional UPDATE changed exactly the n claimed
// rows it names; anything else is impossible while the claim holds their
// locks, and the batch refuses to commit a state it does not understand.
func allRows(res *gorm.DB, n int) error {
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected != int64(n) {
		return fmt.Errorf("%d of %d rows changed", res.RowsAffected, n)
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
