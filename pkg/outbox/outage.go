package outbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// outageLogEvery spaces the warnings of a long outage.
const outageLogEvery = time.Minute

// outageState is what a relay's workers know of an outage.
type outageState struct {
	mu      sync.Mutex
	since   time.Time // the first poll paused by the outage; zero when there is none
	logged  time.Time // the last warning
	skipped int       // polls paused since the last warning
	// jsSubject is set when a batch found JetStream not answering while
	// NATS was connected: a subject whose stream lookup got no answer,
	// asked again before every claim until JetStream answers.
	jsSubject string
}

// unavailable returns why no publish can succeed now, or "" when one may:
// the NATS connection is down, or a batch found JetStream not answering and
// a stream lookup still gets no answer. It reads no row.
func (r *Relay) unavailable(ctx context.Context) string {
	if nc := r.js.Conn(); nc != nil && !nc.IsConnected() {
		return "NATS not connected (" + nc.Status().String() + ")"
	}
	o := &r.outage
	o.mu.Lock()
	subject := o.jsSubject
	o.mu.Unlock()
	if subject == "" {
		return ""
	}
	lctx, cancel := context.WithTimeout(ctx, r.cfg.PublishTimeout)
	defer cancel()
	if _, err := r.js.StreamNameBySubject(lctx, subject); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Sprintf("JetStream not answering (stream lookup for %s: %v)", subject, err)
	}
	o.mu.Lock()
	if o.jsSubject == subject {
		o.jsSubject = ""
	}
	o.mu.Unlock()
	return ""
}

// jetStreamDown makes the polls pause until a stream lookup for subject
// gets an answer.
func (r *Relay) jetStreamDown(subject string) {
	r.outage.mu.Lock()
	r.outage.jsSubject = subject
	r.outage.mu.Unlock()
}

// pause counts a poll that claimed nothing because of an outage, and warns
// when the outage begins and then every outageLogEvery, so that a long one
// does not flood the log.
func (r *Relay) pause(cause string) {
	r.m.outageSkips.Inc()
	now := time.Now()
	o := &r.outage
	o.mu.Lock()
	defer o.mu.Unlock()
	o.skipped++
	if o.since.IsZero() {
		o.since = now
	} else if now.Sub(o.logged) < outageLogEvery {
		return
	}
	r.log.Warn("outbox relay paused: no publish can succeed now; pending rows stay untouched, their retries unspent, until one can",
		"cause", cause, "for", now.Sub(o.since).Round(time.Second), "paused_polls", o.skipped)
	o.logged, o.skipped = now, 0
}

// resume ends the outage pause began, if any, and says so.
func (r *Relay) resume() {
	o := &r.outage
	o.mu.Lock()
	since := o.since
	o.since, o.skipped = time.Time{}, 0
	o.mu.Unlock()
	if !since.IsZero() {
		r.log.Info("outbox relay resumes publishing after an outage", "paused_for", time.Since(since).Round(time.Millisecond))
	}
}

// errNotConnected fails every publish of a batch whose connection dropped
// after PublishBatch found it up.
var errNotConnected = errors.New("nats not connected")

// classify tells what the failed publish of a row on subject means: whether
// it is deferred, keeping the row's retries, and the error to record.
//
// A publish the client could not send (see isDisconnected) proves nothing
// was stored and says nothing about the message: deferred. No responders
// has two causes the client cannot tell apart, so classify asks JetStream
// whether a stream captures subject (once per subject, cached in lookups for
// the batch). If JetStream answers that none does, the subject is a
// configuration error (a wrong prefix, a missing stream) that no waiting
// fixes: it spends a retry, so the row ends failed after MaxRetries, counted
// and redrivable, instead of waiting forever. If JetStream does not answer
// either, or names a stream that did not answer, it is an outage: deferred
// (and, when JetStream did not answer, the relay pauses until it does).
// Anything else (no PubAck in time, an error from the stream) spends a
// retry: the message may have been stored, or may itself be at fault.
func (r *Relay) classify(ctx context.Context, subject string, err error, lookups map[string]error) (deferred bool, reason error) {
	if isDisconnected(err) {
		return true, err
	}
	if !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, jetstream.ErrNoStreamResponse) {
		return false, err
	}
	lerr, ok := lookups[subject]
	if !ok {
		lctx, cancel := context.WithTimeout(ctx, r.cfg.PublishTimeout)
		_, lerr = r.js.StreamNameBySubject(lctx, subject)
		cancel()
		lookups[subject] = lerr
	}
	switch {
	case errors.Is(lerr, jetstream.ErrStreamNotFound):
		return false, fmt.Errorf("no stream captures subject %s (check the streams' subjects and the event prefix): %w", subject, err)
	case lerr != nil:
		r.jetStreamDown(subject)
		return true, fmt.Errorf("JetStream not answering (stream lookup: %v): %w", lerr, err)
	default:
		return true, fmt.Errorf("the stream capturing %s did not answer: %w", subject, err)
	}
}

// isDisconnected reports whether a publish failed because the client had no
// connection to send it on: not connected (errNotConnected), the connection
// closed, or the reconnect buffer full. The message certainly was not
// stored. nats.ErrDisconnected (the connection dropped with the publish in
// flight) is not one: the message may have been stored.
func isDisconnected(err error) bool {
	for _, target := range []error{errNotConnected, nats.ErrConnectionClosed, jetstream.ErrConnectionClosed, nats.ErrReconnectBufExceeded} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
