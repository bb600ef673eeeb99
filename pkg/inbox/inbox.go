// Package inbox consumes JetStream messages exactly once in effect: each
// message is handled inside a database transaction that also records
// (consumer, message id) in processed_message under a unique key, so a
// redelivered or republished message is acknowledged without a second effect.
//
// # Guarantees
//
// JetStream delivers at least once: a message is redelivered when its ack is
// lost, when AckWait passes, or when the publisher's outbox republishes it
// outside the stream's duplicate window. The Consumer turns that into one
// business effect per message id:
//
//   - The processed_message row is inserted first, in the handler's own
//     transaction. A second delivery of the same id either waits on the
//     unique key until the first commits and then sees a duplicate (acked,
//     no effect), or proceeds if the first rolled back. The row and the
//     effect commit or vanish together; there is no window between them.
//   - The ack is sent after the commit. If the process dies in between, the
//     redelivery hits the duplicate key and is acked: at most one effect.
//   - A handler error (a refusal) rolls everything back, is counted in
//     refused_message, and the message is nak'd with a growing delay
//     (Config.Backoff); its MaxDeliver-th refusal records it dead.
//   - A Permanent error, or a message without Nats-Msg-Id, terminates the
//     message at once and records it in dead_message with the reason.
//   - A message the server has delivered DeliveryLimit times without any
//     delivery ending (the handler hung, the process died) is recorded dead
//     on the next delivery ("deliveries exhausted"), without running the
//     handler: the durable consumer allows one delivery more for that.
//   - A dead record that cannot be written while MySQL answers (a missing
//     table, say) is retried by a nak while the server still redelivers. On
//     its last delivery the message is terminated instead (outcome
//     "dropped") and logged at error level with its body and headers: the
//     one case where the log, not dead_message, is what an operator replays
//     from.
//
// The dedup scope is the consumer name: two consumers of one event (say, two
// services) each apply it once. processed_message must be kept at least as
// long as a duplicate can arrive: the stream's MaxAge plus the longest
// outbox redrive delay; Cleanup deletes older rows.
//
// # Outages
//
// Only a handler's refusal counts against MaxDeliver, in refused_message
// (written only when a handler fails, so the count holds across
// redeliveries and restarts and the happy path pays nothing); a delivery
// that fails because MySQL cannot be reached is not an attempt. A failure
// is MySQL's when its error says the connection failed
// (database.IsUnavailable) or the delivery ran out of time (Run gives each
// half of AckWait), and a ping of its own fails too. If the ping succeeds,
// the delivery is nak'd ("interrupted") and counts nothing either: the
// server's delivery count, which DeliveryLimit bounds, is what stops a
// message that keeps running out of time. Any other error is a refusal: a
// constraint, MySQL's own lock wait timeout, a deadlock, a domain error.
//
// On an unreachable MySQL, Run pauses: it stops pulling, keeps every
// delivery it has (in its workers and in the client's buffer) alive with
// InProgress, pings MySQL with a jittered backoff (100 ms to 5 s), then
// hands the same deliveries to its workers again; the inbox_paused and
// inbox_held_messages gauges and a log line at each end show it. A process
// that stops while paused naks what it holds, one that dies leaves it to
// AckWait, and a replica that gets the messages pauses too. The server's
// delivery count, which outages, restarts and lost acks raise, bounds a
// message only through DeliveryLimit. While NATS is down nothing is
// delivered; an ack lost to it brings a redelivery the dedup row absorbs.
//
// # Wiring
//
// Apply Migrations with the service's own. NewConsumer declares the durable
// consumer (one filter subject on NATS 2.9); Run it in a goroutine and stop
// it first at shutdown: it stops pulling, lets the handlers in flight commit
// and ack, then returns. A handler decodes with DecodeJSON, writes through
// tx only, adds its own events with outbox.Add(tx, …), wakes its relay with
// OnCommit, and returns Permanent for what no retry can fix. With
// Config.TracerProvider set, each delivery is a span continuing the trace
// the message carries (see Process), and the events the handler adds join
// that trace.
package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/inbox/migrations"
	"github.com/oncemall/oncemall/pkg/migrate"
)

// Message is one delivered event.
type Message struct {
	ID      string // Nats-Msg-Id, the outbox message number
	Subject string
	Body    []byte
	Headers map[string]string
	// Delivered is the server's delivery count, from 1. It also counts
	// deliveries an outage or a restart ended, so it is not the number of
	// refusals (see Outages in the package doc).
	Delivered uint64
}

// Handler applies a message's business effect inside tx. Returning nil
// commits the effect together with the processed-message row; returning an
// error rolls both back and the message is redelivered later, unless the
// error is Permanent.
//
// A Handler must do all its writes through tx and must not ack, publish or
// call remote services that cannot take part in the transaction; an event it
// emits goes through outbox.Add(tx, …).
type Handler func(ctx context.Context, tx *gorm.DB, msg Message) error

type onCommitKey struct{}

// OnCommit registers fn to run after the handler's transaction committed,
// from a Handler's ctx; it is where a handler that added outbox rows wakes
// its relay. fn does not run when the transaction rolls back or the message
// was a duplicate. Outside a Handler it does nothing.
func OnCommit(ctx context.Context, fn func()) {
	if fns, ok := ctx.Value(onCommitKey{}).(*[]func()); ok {
		*fns = append(*fns, fn)
	}
}

type permanentError struct{ err error }

func (e permanentError) Error() string { return "permanent: " + e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent wraps err to say that redelivery cannot help (malformed payload,
// business rule refusal): the message is terminated and recorded as dead.
// Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err, or an error it wraps, came from Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

// DecodeJSON decodes msg.Body into v; a failure is Permanent, since no
// redelivery will make the payload readable. Unknown fields are ignored:
// producers may add fields to a versioned event without breaking consumers.
func DecodeJSON(msg Message, v any) error {
	if err := json.Unmarshal(msg.Body, v); err != nil {
		return Permanent(fmt.Errorf("decode %s %s: %w", msg.Subject, msg.ID, err))
	}
	return nil
}

// JSON returns a handler, typed on the caller's transaction T, that decodes
// a message's body as E and hands it with the message id to apply. A body
// that cannot be decoded is Permanent, and so is an error of apply that
// permanent reports (a domain refusal no retry changes; nil: none is).
func JSON[T, E any](apply func(ctx context.Context, tx T, messageID string, e E) error, permanent func(error) bool) func(context.Context, T, Message) error {
	return func(ctx context.Context, tx T, msg Message) error {
		var e E
		if err := DecodeJSON(msg, &e); err != nil {
			return err
		}
		err := apply(ctx, tx, msg.ID, e)
		if err != nil && permanent != nil && permanent(err) {
			return Permanent(err)
		}
		return err
	}
}

// Migrations creates processed_message, refused_message and dead_message.
var Migrations = migrate.Source{Name: "inbox", FS: migrations.Files}

// Config tunes a Consumer.
type Config struct {
	Name   string // durable consumer name, also the dedup scope
	Stream string // stream to consume
	// FilterSubjects are subjects within the stream. NATS 2.9 (our server)
	// accepts one filter per consumer; NewConsumer refuses more than one
	// on a server older than 2.10. Several subjects need several consumers
	// (or one wildcard subject).
	FilterSubjects []string
	Workers        int // concurrent handlers (default 16)
	// MaxDeliver is how many refusals by the handler a message gets before
	// it is dead (default 5). Deliveries ended by an unreachable MySQL do
	// not count (see Outages in the package doc).
	MaxDeliver int
	// DeliveryLimit is how many deliveries the server makes, whatever ended
	// them, before the next one records the message dead without running
	// the handler ("deliveries exhausted"): the backstop against a message
	// that hangs its handler or kills its process, which never ends in a
	// refusal. At least MaxDeliver; default 20, or MaxDeliver if higher.
	// The server is told one more, see Process.
	DeliveryLimit int
	// AckWait is how long the server waits for a delivery's ack before it
	// delivers the message again (default 30s). Run gives a delivery's
	// transaction half of it, and then decides with a ping (an eighth of
	// it, at most 2 s), before the server redelivers, whether MySQL hung
	// (the delivery is held) or not (it is nak'd); neither is a refusal.
	// The rest covers a delivery that waited in the client's buffer.
	AckWait time.Duration

	// Backoff is the NakWithDelay delay after refusal n (Backoff[n-1], the
	// last entry repeating); default 1s, 5s, 30s, 2m.
	Backoff []time.Duration

	// TracerProvider starts a span per delivery, continuing the trace the
	// message carries (see Process); the platform passes the service's.
	// Nil or a no-op provider (tracing off) starts none, and the consumer
	// then does no tracing work at all.
	TracerProvider trace.TracerProvider
}

// Settings are the environment-tunable part of a Config, shared by a
// service's consumers, and the retention of the inbox tables. The platform
// embeds them in every service's configuration.
type Settings struct {
	Workers       int           `env:"INBOX_WORKERS" default:"16" usage:"concurrent handlers per consumer"`
	MaxDeliver    int           `env:"INBOX_MAX_DELIVER" default:"5" usage:"refusals by its handler before a failing message is recorded dead; deliveries that failed because MySQL was unreachable do not count"`
	DeliveryLimit int           `env:"INBOX_DELIVERY_LIMIT" default:"20" usage:"deliveries of a message, whatever ended them (outages, restarts, hung handlers), before it is recorded dead; at least INBOX_MAX_DELIVER"`
	AckWait       time.Duration `env:"INBOX_ACK_WAIT" default:"30s" usage:"redelivery delay when a handler neither acks nor naks"`
	// Retention must outlast any duplicate: keep it at least the streams'
	// max age (natsjs.StreamConfig), after which JetStream cannot redeliver.
	Retention       time.Duration `env:"INBOX_RETENTION" default:"168h" usage:"how long processed message ids and refusal counts are kept (at least the streams' max age, 7 days)"`
	DeadRetention   time.Duration `env:"INBOX_DEAD_RETENTION" default:"720h" usage:"how long dead letters are kept for inspection"`
	CleanupSchedule string        `env:"INBOX_CLEANUP_SCHEDULE" default:"@every 10m" usage:"cron spec of the job deleting processed ids, refusal counts and dead letters past their retention"`
	CleanupBatch    int           `env:"INBOX_CLEANUP_BATCH" default:"1000" usage:"rows deleted per cleanup statement"`
}

// Validate reports every unusable setting, each naming its variable.
func (s Settings) Validate() error {
	return errors.Join(
		config.CheckPositive("INBOX_WORKERS", s.Workers),
		config.CheckPositive("INBOX_MAX_DELIVER", s.MaxDeliver),
		checkDeliveryLimit(s.DeliveryLimit, s.MaxDeliver),
		config.CheckPositive("INBOX_ACK_WAIT", s.AckWait),
		config.CheckPositive("INBOX_RETENTION", s.Retention),
		config.CheckPositive("INBOX_DEAD_RETENTION", s.DeadRetention),
		config.CheckPositive("INBOX_CLEANUP_BATCH", s.CleanupBatch),
		config.CheckSchedule("INBOX_CLEANUP_SCHEDULE", s.CleanupSchedule),
	)
}

func checkDeliveryLimit(limit, maxDeliver int) error {
	if limit < maxDeliver {
		return &config.Error{Var: "INBOX_DELIVERY_LIMIT", Value: strconv.Itoa(limit), Err: fmt.Errorf("must be at least INBOX_MAX_DELIVER (%d)", maxDeliver)}
	}
	return nil
}

// Config returns the consumer configuration for name on stream with s's
// tuning and the default backoff.
func (s Settings) Config(name, stream string, subjects ...string) Config {
	return Config{Name: name, Stream: stream, FilterSubjects: subjects, Workers: s.Workers, MaxDeliver: s.MaxDeliver, DeliveryLimit: s.DeliveryLimit, AckWait: s.AckWait}
}

// Defaults of Config.
const (
	// DefaultWorkers keeps a consumer ahead of the API at peak: each
	// handler mostly waits on its commit, and four could not land the
	// payments a saturated API admitted (docs/benchmarks/e2e.md).
	DefaultWorkers       = 16
	DefaultMaxDeliver    = 5
	DefaultDeliveryLimit = 20
	DefaultAckWait       = 30 * time.Second
)

// defaultBackoff is Config.Backoff's default: a refused message is retried
// after 1s, 5s, 30s, then every 2 minutes until MaxDeliver.
var defaultBackoff = []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.MaxDeliver == 0 {
		c.MaxDeliver = DefaultMaxDeliver
	}
	if c.DeliveryLimit == 0 {
		c.DeliveryLimit = max(DefaultDeliveryLimit, c.MaxDeliver)
	}
	if c.AckWait == 0 {
		c.AckWait = DefaultAckWait
	}
	if len(c.Backoff) == 0 {
		c.Backoff = append([]time.Duration(nil), defaultBackoff...)
	}
	return c
}

// Validate reports unusable settings. serverVersion ("2.9.10") is the
// connected NATS server's, used to refuse what it cannot do.
func (c Config) Validate(serverVersion string) error {
	var errs []error
	if c.Name == "" || strings.ContainsAny(c.Name, ".*> \t") {
		errs = append(errs, fmt.Errorf("inbox: consumer name %q must be non-empty without '.', '*', '>' or spaces", c.Name))
	}
	if c.Stream == "" {
		errs = append(errs, errors.New("inbox: Stream is required"))
	}
	if len(c.FilterSubjects) > 1 && !atLeast(serverVersion, 2, 10) {
		errs = append(errs, fmt.Errorf("inbox: consumer %s: NATS %s supports one filter subject per consumer, got %d (use one consumer per subject or a wildcard)", c.Name, serverVersion, len(c.FilterSubjects)))
	}
	if c.Workers <= 0 || c.MaxDeliver <= 0 || c.AckWait <= 0 {
		errs = append(errs, errors.New("inbox: Workers, MaxDeliver and AckWait must be positive"))
	}
	if c.DeliveryLimit < c.MaxDeliver {
		errs = append(errs, fmt.Errorf("inbox: DeliveryLimit %d must be at least MaxDeliver %d", c.DeliveryLimit, c.MaxDeliver))
	}
	for _, d := range c.Backoff {
		if d <= 0 {
			errs = append(errs, errors.New("inbox: Backoff entries must be positive"))
			break
		}
	}
	return errors.Join(errs...)
}

// nakDelay is the redelivery delay after refusal n.
func (c Config) nakDelay(n int) time.Duration {
	i := min(n, len(c.Backoff)) - 1
	return c.Backoff[max(i, 0)]
}

// deliveryTimeout is the time Run gives one delivery's transaction: enough
// of AckWait left after it to ping MySQL (pingTimeout) and hold the message,
// and the messages buffered behind it, before the server delivers them
// again.
func (c Config) deliveryTimeout() time.Duration { return c.AckWait / 2 }

// pingTimeout bounds a ping that tells an unreachable MySQL from a refusal:
// an eighth of AckWait, at most 2 s. A ping that times out on a slow MySQL
// only pauses the consumer until one answers.
func (c Config) pingTimeout() time.Duration { return min(2*time.Second, c.AckWait/8) }

// atLeast reports whether version "X.Y.Z" is at least major.minor; an
// unparsable version counts as old, which only costs a feature.
func atLeast(version string, major, minor int) bool {
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}
