package outbox

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/oncemall/oncemall/pkg/database"
)

// The publish on commit (Send) works through a bounded queue, senders that
// publish what it holds, and one settler that marks the acknowledged rows
// sent.
const (
	// sendQueue bounds the messages Send holds for the senders; past it
	// Send skips, and the poll publishes the rows after their hand-off.
	sendQueue = 4096
	// senders publish the queue's messages: while one waits for its
	// PubAcks, the next publishes.
	senders = 2
	// sendBatch bounds the messages a sender publishes before it waits for
	// their PubAcks: senders × sendBatch messages in flight at most.
	sendBatch = 256
	// settleBatch and settleInterval: the settler marks the acknowledged
	// messages sent in one UPDATE once settleBatch are waiting, or
	// settleInterval after the first of them arrived. The interval delays
	// only the mark (consumers have the event already), and only a crash in
	// it costs a republish.
	settleBatch    = 500
	settleInterval = 50 * time.Millisecond
	// settleTimeout bounds one mark-sent statement.
	settleTimeout = 5 * time.Second
	// settleAttempts bounds the tries of a mark that deadlocked with a
	// claim's settle over the same rows.
	settleAttempts = 3
)

// Reasons Send skips messages, the values of outbox_eager_skipped_total's
// reason label.
const (
	skipQueueFull   = "queue_full"
	skipLate        = "late"
	skipUnavailable = "unavailable"
	skipStopped     = "stopped"
	skipNoID        = "no_id"
)

// queued is a message Send took, with the time it took it.
type queued struct {
	msg Message
	at  time.Time
}

// Send hands msgs to the relay to publish now: the messages Add wrote
// (Add fills in their IDs and headers), after the transaction that wrote
// them has committed. A store calls it once its commit returned nil, and an
// inbox handler through inbox.OnCommit; never before the commit, nor after
// a failed one, or it would publish an event of a change that may not
// exist (a commit that failed may still have committed, its
// acknowledgement lost: its rows are the poll's). It is safe for
// concurrent use.
//
// Send never blocks and never fails: each message is published
// asynchronously, with its ID as Nats-Msg-Id, and its row marked sent once
// JetStream acknowledged it, in an UPDATE shared with the other messages
// acknowledged meanwhile. A message Send cannot take (its queue is full,
// NATS or JetStream is known to be down, Run has returned, the message has
// no ID, or it waited in the queue until the poll may take it) is skipped,
// counted in outbox_eager_skipped_total; a publish that fails is counted in
// outbox_eager_failed_total. Either way the row stays exactly as Add wrote
// it, and the poll publishes it after the hand-off (Config.Handoff): Send
// is an optimisation of latency and cost, never the guarantee.
func (r *Relay) Send(msgs ...Message) {
	if len(msgs) == 0 {
		return
	}
	if reason := r.sendBlocked(); reason != "" {
		r.m.eagerSkipped.WithLabelValues(reason).Add(float64(len(msgs)))
		return
	}
	now := time.Now()
	var noID int
take:
	for i, m := range msgs {
		if m.ID == "" {
			noID++
			continue
		}
		select {
		case r.queue <- queued{m, now}:
		default:
			r.m.eagerSkipped.WithLabelValues(skipQueueFull).Add(float64(len(msgs) - i))
			break take
		}
	}
	if noID > 0 {
		r.m.eagerSkipped.WithLabelValues(skipNoID).Add(float64(noID))
		r.log.Warn("outbox Send got messages without an ID; pass Add the slice of messages, which it fills in, and Send that slice",
			"messages", noID, "subject", msgs[0].Subject)
	}
}

// sendBlocked returns why Send cannot publish now ("" when it can): Run has
// returned, or NATS is not connected, or a publish or a poll found
// JetStream not answering and no poll has found it answering since.
func (r *Relay) sendBlocked() string {
	if r.stopped.Load() {
		return skipStopped
	}
	if nc := r.js.Conn(); nc != nil && !nc.IsConnected() {
		return skipUnavailable
	}
	r.outage.mu.Lock()
	down := r.outage.jsSubject != ""
	r.outage.mu.Unlock()
	if down {
		return skipUnavailable
	}
	return ""
}

// sender publishes the queue's messages, up to sendBatch at a time, and
// hands the IDs JetStream acknowledged to the settler through acked, until
// ctx ends. A message that waited in the queue for longer than the hand-off
// less PublishTimeout is dropped (skipped as late): its PubAck could come
// after the poll claimed its row, and two publishes of every message are
// what a backlog cannot afford.
func (r *Relay) sender(ctx context.Context, acked chan<- []string) {
	late := r.cfg.Handoff - r.cfg.PublishTimeout
	batch := make([]Message, 0, sendBatch)
	take := func(q queued) {
		if time.Since(q.at) > late {
			r.m.eagerSkipped.WithLabelValues(skipLate).Inc()
			return
		}
		batch = append(batch, q.msg)
	}
	for ctx.Err() == nil {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return
		case q := <-r.queue:
			take(q)
		}
	gather:
		for len(batch) < sendBatch {
			select {
			case q := <-r.queue:
				take(q)
			default:
				break gather
			}
		}
		if len(batch) == 0 {
			continue
		}
		if ids := r.sendBatch(ctx, batch); len(ids) > 0 {
			acked <- ids
		}
	}
}

// sendBatch publishes msgs and returns the IDs JetStream acknowledged. It
// writes nothing: a message that failed keeps its row as Add wrote it.
func (r *Relay) sendBatch(ctx context.Context, msgs []Message) []string {
	// Messages on the wire are awaited even when ctx ends (bounded by
	// PublishTimeout), so that a shutdown marks them sent instead of
	// leaving them to a republish.
	ctx = context.WithoutCancel(ctx)
	errs := make([]error, len(msgs))
	r.publish(ctx, msgs, errs)
	ids := make([]string, 0, len(msgs))
	var failed int
	var firstErr error
	lookups := map[string]error{}
	for i, err := range errs {
		if err == nil {
			ids = append(ids, msgs[i].ID)
			continue
		}
		failed++
		// classify's verdict changes nothing here, but when JetStream
		// itself does not answer it records the outage, and Send skips
		// until a poll finds JetStream answering again.
		if _, reason := r.classify(ctx, r.cfg.SubjectPrefix+msgs[i].Subject, err, lookups); firstErr == nil {
			firstErr = reason
		}
	}
	r.m.eagerPublished.Add(float64(len(ids)))
	if failed > 0 {
		r.m.eagerFailed.Add(float64(failed))
		r.sendFailures.warn(r.log, failed, firstErr, r.cfg.Handoff)
	}
	if r.afterPublish != nil && len(ids) > 0 {
		if err := r.afterPublish(ctx, ids); err != nil {
			return nil
		}
	}
	return ids
}

// settler marks the IDs it receives through acked sent, settleBatch at a
// time or settleInterval after the first arrived, until acked is closed;
// then it marks the rest and returns.
func (r *Relay) settler(acked <-chan []string) {
	var ids []string
	flush := time.NewTimer(settleInterval)
	flush.Stop()
	for {
		select {
		case batch, ok := <-acked:
			if !ok {
				r.markSent(ids)
				return
			}
			if len(ids) == 0 {
				flush.Reset(settleInterval)
			}
			ids = append(ids, batch...)
			if len(ids) < settleBatch {
				continue
			}
			flush.Stop()
		case <-flush.C:
		}
		r.markSent(ids)
		ids = ids[:0]
	}
}

// markSentByNoSQL marks the rows Send published sent, by message number,
// where they are still pending: a row the claim path settled first keeps
// what it wrote.
const markSentByNoSQL = "UPDATE local_message SET status = 'sent', sent_at = ?, updated_at = ?, claim_token = NULL, last_error = NULL WHERE status = 'pending' AND message_no IN ?"

// markSent marks the rows of ids sent in one autocommit UPDATE, tried
// again if it deadlocked with a claim's settle over the same rows. A mark
// that fails leaves the rows pending: the poll republishes them after the
// hand-off, and the stream drops the copies.
func (r *Relay) markSent(ids []string) {
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	var err error
	var marked int64
	for range settleAttempts {
		now := time.Now().UTC()
		res := r.db.WithContext(ctx).Exec(markSentByNoSQL, now, now, ids)
		r.m.settleStatements.Inc()
		err, marked = res.Error, res.RowsAffected
		if err == nil || !database.IsDeadlock(err) {
			break
		}
	}
	if err != nil {
		r.log.Warn("outbox could not mark published messages sent; they stay pending, and the poll publishes them again after the hand-off (the stream drops the copies)",
			"messages", len(ids), "err", err)
		return
	}
	r.m.published.Add(float64(marked))
	if missing := int64(len(ids)) - marked; missing > 0 {
		r.log.Warn("outbox published messages whose rows were not pending: the claim path had published them (a Wake, or a hand-off shorter than the publish on commit took), or Send was called for a transaction that did not commit",
			"messages", missing)
	}
}

// leaveQueued empties the queue Run's senders left and counts its messages
// as skipped: their rows wait for the poll of the next start.
func (r *Relay) leaveQueued() {
	for {
		select {
		case <-r.queue:
			r.m.eagerSkipped.WithLabelValues(skipStopped).Inc()
		default:
			return
		}
	}
}

// failureLog spaces the warnings of failed publishes on commit: the first
// after a quiet minute at once, then one a minute with the count.
type failureLog struct {
	mu     sync.Mutex
	logged time.Time
	count  int
}

func (l *failureLog) warn(log *slog.Logger, n int, first error, handoff time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.count += n
	now := time.Now()
	if now.Sub(l.logged) < outageLogEvery {
		return
	}
	log.Warn("outbox publishes on commit failed; their rows stay as committed, their retries untouched, and the poll publishes them after the hand-off",
		"messages", l.count, "first_err", first, "handoff", handoff)
	l.logged, l.count = now, 0
}
