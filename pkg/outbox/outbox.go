// Package outbox is the transactional outbox (the "local message table"): a
// service writes its events into local_message in the same transaction as
// the business change (Add), hands them to its Relay once that committed
// (Send), and the relay publishes them to JetStream with Nats-Msg-Id set to
// the message number. The pattern, its traps and the figures are in
// docs/patterns.md and docs/benchmarks/outbox.md.
//
// # Guarantees
//
// At least once, never lost: a row exists if and only if the business change
// committed (Add runs in the caller's transaction and never publishes), and a
// row leaves the pending state only after JetStream acknowledged storing it
// (a PubAck) or after MaxRetries failed attempts, when it becomes failed,
// counted in outbox_failed_total and logged with its last_error, and waits
// for a redrive (Redrive, RedriveHandler, the "outbox redrive" command).
//
// Send publishes on commit: no claim and no transaction; the rows it
// published are marked sent in one UPDATE per batch of PubAcks. It is best
// effort: what it skips (queue full, NATS known down, relay stopped) or
// fails to publish keeps its row exactly as Add wrote it. The claim path is
// the safety net: the poll (Poll) claims the rows Send left, once their
// hand-off (Config.Handoff) has passed, and the rows whose backoff or lease
// has; Wake claims every due row at once, for code that adds rows without
// Send. A claim leases its batch in a short READ COMMITTED transaction
// (SELECT … FOR UPDATE SKIP LOCKED, then an UPDATE writing the lease and the
// batch's token), publishes with no transaction open, and settles in another
// that changes only the rows still carrying its token, so replicas never
// wait for one another and a stalled NATS holds no lock.
//
// Duplicates are possible and bounded: a relay that dies between a PubAck
// and the mark leaves the row pending, and the poll publishes it again after
// the hand-off or the lease. Two layers absorb that republish:
//
//  1. JetStream's duplicate window (events.DuplicateWindow, 10 minutes)
//     drops a message whose Nats-Msg-Id it stored in the window
//     (PubAck.Duplicate, counted in outbox_publish_duplicates_total).
//     Validate keeps the hand-off plus the retry schedule inside it, so
//     every automatic republish is dropped.
//  2. The consumers' processed_message table (package inbox), keyed by the
//     same id, covers what the window cannot: a redrive hours later, an
//     attempt stored without a PubAck that then waited out an outage longer
//     than the window, a stream restored from backup. Consumers must always
//     dedup; the window keeps the stream clean, it is not the guarantee.
//
// No ordering: Send, the claims of several relays and the retries publish
// concurrently, so consumers must not rely on the order of events.
//
// # Failures and outages
//
// A failed claimed publish (no PubAck within PublishTimeout, an error from
// the stream) leaves the row pending with retry_count+1 and next_retry_time
// pushed out by a capped exponential backoff with jitter. An outage is not a
// failure of the message, and the relay touches no row while it lasts:
// while the NATS connection is down, or after a publish found JetStream not
// answering and until a stream lookup is answered again, Send skips and the
// poll claims nothing (outbox_outage_skips_total, a warning as it begins
// and once a minute). The backlog keeps its retries and drains at the first
// poll after NATS is back. Only a claimed batch in flight when the outage
// begins sees it: its rows are deferred for the first backoff, retry_count
// untouched (outbox_outage_deferrals_total). No responders on a subject no
// stream captures is a configuration error, not an outage: it spends
// retries and ends failed ("no stream captures subject …").
//
// # Wiring and shutdown
//
// A service on pkg/platform gets the relay from its declaration (Wiring.Outbox):
// the platform applies Migrations, runs the relay, schedules Poll and
// Cleanup, mounts the redrive endpoint and the "outbox" command, and stops
// the relay after the consumers and the jobs. A store calls Add in its
// transaction and Send with the same messages after the commit (an inbox
// handler through inbox.OnCommit). When Run's context ends, claimed batches
// are published and settled and the PubAcks Send awaits are marked; messages
// still queued for Send are left to the poll of the next start. With
// Config.TracerProvider set, each publish is a span continuing the trace the
// row was written in (see Add).
package outbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/migrate"
	"github.com/oncemall/oncemall/pkg/outbox/migrations"
	"github.com/oncemall/oncemall/pkg/tracing"
)

// Message is one event to publish.
type Message struct {
	// ID is the message number: unique, the Nats-Msg-Id and the consumers'
	// dedup key. Add generates one when empty.
	ID      string
	Subject string
	Body    []byte
	Headers map[string]string
}

// Migrations creates local_message; apply it with the service's own.
var Migrations = migrate.Source{Name: "outbox", FS: migrations.Files}

// Row statuses of local_message.
const (
	StatusPending = "pending"
	StatusSent    = "sent"
	StatusFailed  = "failed"
)

// maxIDLen matches local_message.message_no.
const maxIDLen = 64

// Add writes msgs into local_message inside tx, the caller's business
// transaction. It never publishes: hand the same msgs to Relay.Send after
// the commit. A message without an ID gets a time-ordered UUID (v7), which
// keeps the unique index append-mostly. Add writes into msgs what their
// rows hold, the IDs and the headers, so pass a slice (Add(tx, msgs...))
// and Send that slice.
//
// When the transaction's context (tx.WithContext(ctx), as the stores pass
// it) is in a trace, every row's headers also get that trace: traceparent
// and the baggage, which carries the request id. The relay publishes the
// row in a span continuing it, so the request, its transaction, the
// publish and the consumers are one trace. A header the caller set keeps
// the caller's value. Outside a trace (tracing off) nothing is added.
func Add(tx *gorm.DB, msgs ...Message) error {
	if len(msgs) == 0 {
		return nil
	}
	return insert(tx, traceHeaders(tx), msgs)
}

// traceHeaders returns the headers that carry the trace of tx's context, or
// nil when it is in none.
func traceHeaders(tx *gorm.DB) map[string]string {
	if tx.Statement == nil || tx.Statement.Context == nil {
		return nil
	}
	ctx := tx.Statement.Context
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	h := make(map[string]string, 3)
	tracing.Inject(ctx, h)
	return h
}

// insert writes msgs with the headers extra added to each message's own.
func insert(tx *gorm.DB, extra map[string]string, msgs []Message) error {
	now := time.Now().UTC()
	var sb strings.Builder
	sb.WriteString("INSERT INTO local_message (message_no, topic, body, headers, status, retry_count, next_retry_time, created_at, updated_at) VALUES ")
	args := make([]any, 0, len(msgs)*7)
	for i := range msgs {
		m := &msgs[i]
		if m.ID == "" {
			id, err := uuid.NewV7()
			if err != nil {
				return fmt.Errorf("outbox: message id: %w", err)
			}
			m.ID = id.String()
		}
		if len(m.ID) > maxIDLen {
			return fmt.Errorf("outbox: message id %q longer than %d", m.ID, maxIDLen)
		}
		if m.Subject == "" {
			return errors.New("outbox: message without subject")
		}
		var headers any
		m.Headers = withHeaders(extra, m.Headers)
		if h := m.Headers; len(h) > 0 {
			b, err := json.Marshal(h)
			if err != nil {
				return fmt.Errorf("outbox: headers of %s: %w", m.ID, err)
			}
			headers = string(b)
		}
		body := m.Body
		if body == nil {
			body = []byte{}
		}
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString("(?, ?, ?, ?, '" + StatusPending + "', 0, ?, ?, ?)")
		args = append(args, m.ID, m.Subject, body, headers, now, now, now)
	}
	if err := tx.Exec(sb.String(), args...).Error; err != nil {
		return fmt.Errorf("outbox: add %d message(s): %w", len(msgs), err)
	}
	return nil
}

// withHeaders returns own with the headers of extra it does not set; own
// itself when extra is empty, so the caller's map is never written.
func withHeaders(extra, own map[string]string) map[string]string {
	if len(extra) == 0 {
		return own
	}
	h := make(map[string]string, len(extra)+len(own))
	maps.Copy(h, extra)
	maps.Copy(h, own)
	return h
}

// JSON returns a message carrying v encoded as JSON on subject, with id as
// its number ("" lets Add generate one).
func JSON(id, subject string, v any) (Message, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return Message{}, fmt.Errorf("outbox: encode %s: %w", subject, err)
	}
	return Message{ID: id, Subject: subject, Body: b}, nil
}
