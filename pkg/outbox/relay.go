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
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/tracing"
)

// Relay publishes local_message rows to JetStream: the messages handed to
// Send at once, and the rows Send did not publish through the claim path
// (see the package doc).
type Relay struct {
	db  *gorm.DB
	js  jetstream.JetStream
	cfg Config
	log *slog.Logger
	m   *metrics
	// tracer starts the publish spans; nil when tracing is off.
	tracer trace.Tracer
	// wake and poll make a claim loop claim: wake every row due by its
	// next_retry_time, poll only those whose hand-off has passed too.
	wake, poll chan struct{}
	// queue holds the messages Send handed over until a sender takes them.
	queue chan queued
	// stopped is set when Run has returned: Send then leaves every message
	// to the poll of the next start.
	stopped atomic.Bool
	// outage is what the workers know of a NATS or JetStream outage.
	outage outageState
	// sendFailures spaces the warnings of failed publishes on commit.
	sendFailures failureLog
	// afterPublish, set only by the package's tests, runs after a batch's
	// PubAcks (claimed or sent) and before it is settled; an error abandons
	// the batch as a crash at that point would.
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
	r := &Relay{db: db, js: js, cfg: cfg, log: log, m: m,
		wake: make(chan struct{}, 1), poll: make(chan struct{}, 1), queue: make(chan queued, sendQueue)}
	if tracing.Enabled(cfg.TracerProvider) {
		r.tracer = cfg.TracerProvider.Tracer(tracerScope)
	}
	return r, nil
}

// Config returns the relay's effective configuration (defaults filled).
func (r *Relay) Config() Config { return r.cfg }

// Wake makes the claim path claim at once every row whose next_retry_time
// has come, the rows still in their hand-off included: for code that adds
// rows and does not Send them (a bulk producer, say), after its commit. Code
// that calls Send must not also Wake for the same rows: the claim would
// race their publish on commit (the stream drops the copy, but the claim
// costs two transactions). It never blocks.
func (r *Relay) Wake() { signal(r.wake) }

// pollNow makes the claim path claim the rows that are due, leaving to Send
// those still in their hand-off: the safety net's step.
func (r *Relay) pollNow() { signal(r.poll) }

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Run publishes until ctx ends: the messages handed to Send as they come,
// and on the claim path a batch whenever it is woken (Wake) or polled
// (Poll, and once at the start for rows committed while no relay ran),
// claiming again while batches come back full.
//
// When ctx ends, batches already claimed are still published and committed
// (bounded by PublishTimeout), and the messages Send published are still
// awaited and marked sent, so a shutdown does not turn into a republish.
// Messages still queued for Send are left as they are: the poll of the
// next start publishes them after their hand-off. Then Run returns nil.
func (r *Relay) Run(ctx context.Context) error {
	r.stopped.Store(false)
	acked := make(chan []string, senders)
	settled := make(chan struct{})
	go func() {
		defer close(settled)
		r.settler(acked)
	}()
	var claims, sends sync.WaitGroup
	for range r.cfg.Workers {
		claims.Go(func() { r.loop(ctx) })
	}
	for range senders {
		sends.Go(func() { r.sender(ctx, acked) })
	}
	r.pollNow()
	sends.Wait()
	close(acked)
	r.stopped.Store(true)
	r.leaveQueued()
	claims.Wait()
	<-settled
	return nil
}

func (r *Relay) loop(ctx context.Context) {
	for {
		var handoff time.Duration
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-r.poll:
			handoff = r.cfg.Handoff
		}
		for ctx.Err() == nil {
			n, err := r.publishBatch(ctx, handoff)
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

// message is the row as the message Add wrote.
func (c claimed) message() (Message, error) {
	m := Message{ID: c.MessageNo, Subject: c.Topic, Body: c.Body}
	if c.Headers.Valid && c.Headers.String != "" {
		if err := json.Unmarshal([]byte(c.Headers.String), &m.Headers); err != nil {
			return m, fmt.Errorf("decode stored headers: %w", err)
		}
	}
	return m, nil
}

// claimSQL selects due rows and locks them, skipping rows another relay
// holds. The values are formatted into the statement (they are ours:
// timestamps and an int) so the driver sends one text query instead of a
// prepare, execute and close: three round trips on the hot path.
const claimSQL = `SELECT id, message_no, topic, body, headers, retry_count
FROM local_message
WHERE status = 'pending' AND next_retry_time <= '%s'%s
ORDER BY next_retry_time
LIMIT %d
FOR UPDATE SKIP LOCKED`

// handoffSQL is claimSQL's condition for a claim that leaves rows in their
// hand-off to Send. A row as Add wrote it (never leased: no claim token;
// never written since: updated_at is still its created_at) has its
// creation time as next_retry_time and is due a hand-off after it; any
// other row is due at next_retry_time (the end of a lease, a backoff or a
// deferral, or a redrive). The rows in their hand-off are the few that Send
// has not marked sent yet, so the range the claim steps over stays small.
const handoffSQL = `
  AND (next_retry_time <= '%s' OR claim_token IS NOT NULL OR updated_at <> created_at)`

const sqlTime = "2006-01-02 15:04:05.000000"

// PublishBatch claims up to BatchSize rows due by their next_retry_time,
// the rows still in their hand-off included (what Wake asks for),
// publishes them, waits for the PubAcks and settles the outcome. It returns
// how many rows it claimed. No transaction is open while the batch is on
// the wire: the claim is a lease written in a short transaction of its own
// (claim), and the settle another (settle), which changes only the rows
// that still carry this batch's token. During an outage (NATS not
// connected, JetStream not answering) it claims nothing and returns 0
// without touching a row. Run calls it; it is exported for tools and tests
// that drive a relay step by step.
func (r *Relay) PublishBatch(ctx context.Context) (int, error) {
	return r.publishBatch(ctx, 0)
}

// publishBatch is PublishBatch leaving the rows younger than handoff that
// no relay has touched to Send (handoff 0 leaves none).
func (r *Relay) publishBatch(ctx context.Context, handoff time.Duration) (int, error) {
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
	rows, token, err := r.claim(bctx, handoff)
	if err != nil || len(rows) == 0 {
		return 0, err
	}
	r.m.claimed.Add(float64(len(rows)))
	claimedAt := time.Now()
	if len(rows) == r.cfg.BatchSize {
		// More is probably due: let another worker claim the next batch
		// while this one is on the wire.
		if handoff == 0 {
			r.Wake()
		} else {
			r.pollNow()
		}
	}

	msgs := make([]Message, len(rows))
	pubErrs := make([]error, len(rows))
	for i, row := range rows {
		msgs[i], pubErrs[i] = row.message()
	}
	r.publish(bctx, msgs, pubErrs)
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

// claim locks up to BatchSize due rows, leaving the rows younger than
// handoff that no relay has touched (see handoffSQL), and leases them to
// this batch: their next_retry_time moves to the end of the lease and
// claim_token to a fresh token, so the other relays' claims skip them until
// the lease ends, and the transaction commits at once. READ COMMITTED
// matters: under REPEATABLE READ the locking read would also take gap locks
// and block the business transactions inserting new rows at the end of the
// index.
func (r *Relay) claim(ctx context.Context, handoff time.Duration) ([]claimed, string, error) {
	token, err := newToken()
	if err != nil {
		return nil, "", err
	}
	var rows []claimed
	err = r.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		now := time.Now().UTC()
		var untouched string
		if handoff > 0 {
			untouched = fmt.Sprintf(handoffSQL, now.Add(-handoff).Format(sqlTime))
		}
		if err := tx.Raw(fmt.Sprintf(claimSQL, now.Format(sqlTime), untouched, r.cfg.BatchSize)).Scan(&rows).Error; err != nil {
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
		r.log.Warn("rows of an outbox batch changed under it: its claim lease ran out and another relay claimed them, or Send marked them sent", "rows", lost, "lease", r.cfg.ClaimLease)
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

// publish sends msgs asynchronously with Nats-Msg-Id set to each ID and
// waits for their PubAcks, filling errs (one per message: nil = stored). A
// message whose error is already set is not sent. With tracing on, each
// message is published in a span of its own, continuing the trace of its
// headers, which ends with its PubAck. The claim path and Send both publish
// through it.
func (r *Relay) publish(ctx context.Context, msgs []Message, errs []error) {
	if nc := r.js.Conn(); nc != nil && !nc.IsConnected() {
		// The connection dropped since the caller looked. Publishing now
		// would only fill the client's reconnect buffer and time out; fail
		// fast: a claimed batch is deferred and the next polls pause, and
		// Send skips until the connection is back.
		for i := range errs {
			if errs[i] == nil {
				errs[i] = fmt.Errorf("%w (%s)", errNotConnected, nc.Status())
			}
		}
		return
	}
	futures := make([]jetstream.PubAckFuture, len(msgs))
	// spans[i] is message i's publish span; none when tracing is off.
	var spans []trace.Span
	if r.tracer != nil {
		spans = make([]trace.Span, len(msgs))
		defer func() { endPublishSpans(spans, errs) }()
	}
	for i, m := range msgs {
		if errs[i] != nil {
			continue
		}
		subject := r.cfg.SubjectPrefix + m.Subject
		msg := nats.NewMsg(subject)
		msg.Data = m.Body
		for k, v := range m.Headers {
			msg.Header.Set(k, v)
		}
		if spans != nil {
			var carrier map[string]string
			carrier, spans[i] = r.startPublishSpan(ctx, subject, m.ID, m.Headers)
			for k, v := range carrier {
				msg.Header.Set(k, v)
			}
		}
		msg.Header.Set(jetstream.MsgIDHeader, m.ID)
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
