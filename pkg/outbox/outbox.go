// Package outbox is the transactional outbox (the "local message table"): a
// service writes its events into local_message in the same database
// transaction as the business change, and a Relay publishes them to JetStream
// afterwards with Nats-Msg-Id set to the message number.
//
// # Guarantees
//
// At least once, never lost: a row exists if and only if the business change
// committed (Add runs in the caller's transaction and never publishes), and a
// row leaves the pending state only after JetStream acknowledged storing it
// (a PubAck) or after MaxRetries failed attempts, when it becomes failed and
// waits for a redrive. Nothing is ever lost silently.
//
// Duplicates are possible and bounded: a relay that dies between the PubAck
// and the UPDATE that marks the row sent leaves the row pending, and the
// first claim after its lease publishes it again. Two layers absorb that republish:
//
//  1. JetStream's duplicate window (events.DuplicateWindow, 10 minutes): a
//     message with a Nats-Msg-Id already stored in the window is dropped and
//     acknowledged with PubAck.Duplicate. A crash republish happens when the
//     claim lease ends (30 seconds by default), well inside the window, and the default
//     retry schedule (Config.Validate checks it) spans less than the window
//     too, so the automatic republishes of a row that keeps failing are
//     dropped by the stream.
//  2. The consumers' processed_message table (package inbox) keyed by the same
//     id. It covers what the window cannot: a redrive of a failed row hours
//     later whose earlier attempt did reach the stream, a row whose attempt
//     was stored without a PubAck and then waited out an outage longer than
//     the window (outages are not bounded by the retry span), or a
//     stream restored from backup. Consumers must therefore always dedup;
//     the window is an optimisation that keeps the stream clean, not the
//     guarantee.
//
// No ordering: rows are claimed by next_retry_time, several relays publish
// concurrently and a failed row is retried later, so consumers must not rely
// on the order of events (state machines with conditional updates do not).
//
// # Several replicas
//
// A relay claims a batch in a short READ COMMITTED transaction: SELECT …
// FOR UPDATE SKIP LOCKED of due rows, then one UPDATE that leases them
// (next_retry_time moves ClaimLease ahead, claim_token gets the batch's
// token), and the commit. It publishes with no transaction open, then
// settles in another short transaction that changes only the rows still
// carrying its token. Relays never wait for one another and never publish
// the same row at once; a relay that dies mid-batch leaves its rows to the
// others when the lease ends (a republish inside the duplicate window, see
// above). Holding the claim's transaction open across the publish instead
// would keep row locks and a pooled connection for as long as NATS takes to
// answer, and a stalled NATS would stall the database with it.
//
// # Failures
//
// A failed publish (no PubAck within PublishTimeout, an error from the
// stream) leaves the row pending with retry_count+1 and next_retry_time
// pushed out by a capped exponential backoff with jitter. After MaxRetries
// the row becomes failed: counted in outbox_failed_total, logged at error
// level with the reason, kept in last_error, and never retried again until a
// redrive (Redrive, RedriveHandler, or the service's "outbox redrive"
// command) puts it back to pending with a fresh budget.
//
// An outage is not a failure of the message, and the relay touches no row
// while it lasts. Before each claim it checks that the NATS connection is
// up and, once a batch has found JetStream itself not answering, that a
// stream lookup is answered again; until then the poll claims nothing,
// counts in outbox_outage_skips_total, and warns when the outage begins and
// then once a minute. The backlog stays pending as committed, its retries
// unspent, however long the outage; it drains at the first poll after NATS
// and JetStream answer again, and no redrive is needed. Only the batch in flight when an outage begins
// sees it: the rows whose publish the client could not send (the
// connection dropped mid-batch) or that got no responders while JetStream
// did not answer are deferred with one UPDATE, for the first backoff only,
// last_error set and retry_count untouched, counted in
// outbox_outage_deferrals_total. No responders on a subject that JetStream
// says no stream captures (a wrong prefix, a missing stream) is a
// configuration error, not an outage: it spends retries like any failure,
// the row ends failed with "no stream captures subject …" in last_error,
// and a redrive publishes it once the stream exists.
//
// # Wiring
//
// A service on pkg/platform gets all of this from its declaration: the
// platform applies Migrations, creates the relay, runs it, schedules its
// poll and cleanup (Poll, Cleanup), mounts the redrive endpoint (POST
// /admin/outbox/redrive behind the admin token), serves Command as the
// "outbox" subcommand, and stops the consumers, then the jobs, then the
// relay, so the last events committed are still published. The service's
// stores call Add in their transactions and Wake after the commit. With
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
// transaction. It never publishes: call Relay.Wake after the commit.
// A message without an ID gets a time-ordered UUID (v7), which keeps the
// unique index append-mostly; the ID is written into msgs itself, so pass a
// slice (Add(tx, msgs...)) to read the generated IDs back.
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
		if h := withHeaders(extra, m.Headers); len(h) > 0 {
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
