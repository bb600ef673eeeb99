package outbox

import (
	"context"
	crand "crypto/rand"
	"database/sql"
	"encoding/hex"
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
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/tracing"
)

// Relay publishes pending local_message rows to JetStream.
type Relay struct {
	db  *gorm.DB
	js  jetstream.JetStream
	cfg Config
	log *slog.Logger
	m   *metrics
	// tracer starts the publish spans; nil when tracing is off.
	tracer trace.Tracer
	wake   chan struct{}
	// outage is what the workers know of a NATS or JetStream outage.
	outage outageState
	// afterPublish, set only by the package's tests, runs after a batch's
	// PubAcks and before it is settled; an error abandons the batch as a
	// crash at that point would.
	afterPublish func(ctx context.Context, ids []string) error
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
	r := &Relay{db: db, js: js, cfg: cfg, log: log, m: m, wake: make(chan struct{}, 1)}
	if tracing.Enabled(cfg.TracerProvider) {
		r.tracer = cfg.TracerProvider.Tracer(tracerScope)
	}
	return r, nil
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
// the PubAcks and settles the outcome. It returns how many rows it claimed.
// No transaction is open while the batch is on the wire: the claim is a
// lease written in a short transaction of its own (claim), and the settle
// another (settle), which changes only the rows that still carry this
// batch's token. During an outage (NATS not connected, JetStream not
// answering) it claims nothing and returns 0 without touching a row. Run
// calls it; it is exported for tools and tests that drive a relay step by
// step.
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
	// The batch finishes even if ctx ends meanwhile (settling after the
	// PubAcks saves a republish), but never outlives its lease: past it,
	// another relay may own the rows.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.ClaimLease)
	defer cancel()
	start := time.Now()
	rows, token, err := r.claim(bctx)
	if err != nil || len(rows) == 0 {
		return 0, err
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
	var out settlement
	var sentNos []string
	lookups := map[string]error{}
	for i, perr := range pubErrs {
		row := rows[i]
		if perr == nil {
			out.sent = append(out.sent, row.ID)
			sentNos = append(sentNos, row.MessageNo)
			continue
		}
		deferrable, reason := r.classify(bctx, r.cfg.SubjectPrefix+row.Topic, perr, lookups)
		if deferrable {
			out.deferred = append(out.deferred, row.ID)
			if out.firstDeferErr == nil {
				out.firstDeferErr = reason
			}
			continue
		}
		out.failed = append(out.failed, failedRow{row, reason})
		if out.firstRetryErr == nil {
			out.firstRetryErr = reason
		}
	}
	if r.afterPublish != nil && len(sentNos) > 0 {
		if err := r.afterPublish(bctx, sentNos); err != nil {
			return len(rows), fmt.Errorf("after publish: %w", err)
		}
	}
	retried, failed, err := r.settle(bctx, token, out)
	if err != nil {
		return len(rows), err
	}
	r.log.Debug("outbox batch", "claimed", len(rows), "sent", len(out.sent), "retried", retried, "failed", failed, "deferred", len(out.deferred),
		"claim", claimedAt.Sub(start), "publish", publishedAt.Sub(claimedAt), "settle", time.Since(publishedAt))
	r.m.published.Add(float64(len(out.sent)))
	r.m.retries.Add(float64(retried))
	r.m.failed.Add(float64(failed))
	r.m.deferred.Add(float64(len(out.deferred)))
	r.m.batch.Observe(time.Since(start).Seconds())
	if retried > 0 {
		r.log.Warn("outbox publishes failed; rescheduled with backoff", "count", retried, "first_err", out.firstRetryErr)
	}
	if len(out.deferred) > 0 {
		r.log.Warn("an outage cut outbox publishes off; rows deferred, their retries untouched", "count", len(out.deferred), "first_err", out.firstDeferErr)
	}
	return len(rows), nil
}

// claim locks up to BatchSize due rows and leases them to this batch: their
// next_retry_time moves to the end of the lease and claim_token to a fresh
// token, so the other relays' claims skip them until the lease ends, and
// the transaction commits at once. READ COMMITTED matters: under REPEATABLE
// READ the locking read would also take gap locks and block the business
// transactions inserting new rows at the end of the index.
func (r *Relay) claim(ctx context.Context) ([]claimed, string, error) {
	token, err := newToken()
	if err != nil {
		return nil, "", err
	}
	var rows []claimed
	err = r.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		now := time.Now().UTC()
		if err := tx.Raw(fmt.Sprintf(claimSQL, now.Format(sqlTime), r.cfg.BatchSize)).Scan(&rows).Error; err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		ids := make([]uint64, len(rows))
		for i, row := range rows {
			ids[i] = row.ID
		}
		return allRows(tx.Exec(leaseSQL(now.Add(r.cfg.ClaimLease), token, ids)), len(ids))
	}, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, "", fmt.Errorf("claim: %w", err)
	}
	return rows, token, nil
}

// leaseSQL leases ids to token until until (see claimSQL for why the values
// are inlined: a timestamp, a token of hex digits and integers, all ours).
func leaseSQL(until time.Time, token string, ids []uint64) string {
	return "UPDATE local_message SET next_retry_time = '" + until.Format(sqlTime) + "', claim_token = '" + token + "' WHERE id IN " + idList(ids)
}

// newToken returns a batch token: 16 random hex digits.
func newToken() (string, error) {
	var b [8]byte
	if _, err := crand.Read(b[:]); err != nil {
		return "", fmt.Errorf("claim token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// settlement is what a batch's publish came to.
type settlement struct {
	sent, deferred               []uint64
	failed                       []failedRow
	firstRetryErr, firstDeferErr error
}

type failedRow struct {
	row    claimed
	reason error
}

// settle records a batch's outcome in one short transaction, changing only
// the rows that still carry token. A row that no longer does was claimed
// by another relay after this batch's lease ran out; whatever that relay
// does with it stands (a second publish of a row is dropped by JetStream's
// duplicate window and by the consumers), so it is only logged here.
func (r *Relay) settle(ctx context.Context, token string, out settlement) (retried, failed int, err error) {
	var lost int64
	err = r.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		now := time.Now().UTC()
		if len(out.sent) > 0 {
			res := tx.Exec(markSentSQL(now, token, out.sent))
			if res.Error != nil {
				return fmt.Errorf("mark %d sent: %w", len(out.sent), res.Error)
			}
			lost += int64(len(out.sent)) - res.RowsAffected
		}
		if len(out.deferred) > 0 {
			// Nothing reached a stream, so the retry budget, which bounds
			// the failures of a message, stays as it is. The short delay
			// only keeps the next polls from claiming the rows again before
			// they notice the outage and pause; last_error is the batch's
			// first deferral.
			res := tx.Exec("UPDATE local_message SET next_retry_time = ?, claim_token = NULL, last_error = ?, updated_at = ? WHERE status = 'pending' AND claim_token = ? AND id IN "+idList(out.deferred),
				now.Add(r.backoff(1)), truncate(out.firstDeferErr.Error(), 512), now, token)
			if res.Error != nil {
				return fmt.Errorf("defer %d: %w", len(out.deferred), res.Error)
			}
			lost += int64(len(out.deferred)) - res.RowsAffected
		}
		for _, f := range out.failed {
			retry := f.row.RetryCount + 1
			status, next := StatusPending, now.Add(r.backoff(retry))
			if retry >= r.cfg.MaxRetries {
				status, next = StatusFailed, now
			}
			res := tx.Exec("UPDATE local_message SET status = ?, retry_count = ?, next_retry_time = ?, claim_token = NULL, last_error = ?, updated_at = ? WHERE id = ? AND status = 'pending' AND claim_token = ?",
				status, retry, next, truncate(f.reason.Error(), 512), now, f.row.ID, token)
			if res.Error != nil {
				return fmt.Errorf("reschedule %s: %w", f.row.MessageNo, res.Error)
			}
			if res.RowsAffected == 0 {
				lost++
				continue
			}
			if status == StatusFailed {
				failed++
				r.log.Error("outbox message failed after max retries; redrive it once the cause is fixed",
					"message_no", f.row.MessageNo, "subject", f.row.Topic, "retries", retry, "err", f.reason)
			} else {
				retried++
			}
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("settle batch: %w", err)
	}
	if lost > 0 {
		r.log.Warn("outbox batch outlived its claim lease; another relay owns some of its rows", "rows", lost, "lease", r.cfg.ClaimLease)
	}
	return retried, failed, nil
}

// markSentSQL is the batch mark-sent UPDATE as one text statement (see
// claimSQL for why the values are inlined).
func markSentSQL(now time.Time, token string, ids []uint64) string {
	ts := now.Format(sqlTime)
	return "UPDATE local_message SET status = 'sent', sent_at = '" + ts + "', updated_at = '" + ts + "', claim_token = NULL, last_error = NULL WHERE status = 'pending' AND claim_token = '" + token + "' AND id IN " + idList(ids)
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
// has one error (nil = stored) per row. With tracing on, each row is
// published in a span of its own, which ends with its PubAck.
func (r *Relay) publish(ctx context.Context, rows []claimed) (errs []error) {
	errs = make([]error, len(rows))
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
	// spans[i] is row i's publish span; none when tracing is off.
	var spans []trace.Span
	if r.tracer != nil {
		spans = make([]trace.Span, len(rows))
		defer func() { endPublishSpans(spans, errs) }()
	}
	for i, row := range rows {
		subject := r.cfg.SubjectPrefix + row.Topic
		msg := nats.NewMsg(subject)
		msg.Data = row.Body
		var h map[string]string
		if row.Headers.Valid && row.Headers.String != "" {
			if err := json.Unmarshal([]byte(row.Headers.String), &h); err != nil {
				errs[i] = fmt.Errorf("decode stored headers: %w", err)
				continue
			}
		}
		if spans != nil {
			h, spans[i] = r.startPublishSpan(ctx, subject, row.MessageNo, h)
		}
		for k, v := range h {
			msg.Header.Set(k, v)
		}
		msg.Header.Set(jetstream.MsgIDHeader, row.MessageNo)
		f, err := r.js.PublishMsgAsync(msg)
		if err != nil {
			errs[i] = fmt.Errorf("publish: %w", err)
			continue
		}
		futures[i] = f
	}
	acked := func(i int, ack *jetstream.PubAck) {
		if ack != nil && ack.Duplicate {
			r.m.duplicates.Inc()
			if spans != nil {
				spans[i].SetAttributes(tracing.DuplicateKey.Bool(true))
			}
		}
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
				acked(i, ack)
			case err := <-f.Err():
				errs[i] = err
			default:
				errs[i] = errors.New("no PubAck within the publish timeout")
			}
			continue
		}
		select {
		case ack := <-f.Ok():
			acked(i, ack)
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
