package outbox

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/events"
)

// Config tunes a Relay. Zero fields take the defaults listed; WithDefaults
// fills them and Validate checks the result. The env tags let a service
// embed it in its configuration (pkg/config), so every service reads the
// same OUTBOX_* variables.
type Config struct {
	// BatchSize is how many rows one claim locks and publishes (default
	// 1000). BatchSize × Workers messages of the claim path and up to 512
	// of Send are in flight at once per relay; keep them within the
	// JetStream context's PublishAsyncMaxPending (4000 by default) or
	// publishes stall.
	BatchSize int `env:"OUTBOX_BATCH_SIZE" default:"1000" usage:"outbox rows claimed and published per batch"`
	// Workers is how many claim loops run in one relay (default 2), so one
	// batch is published while the next is claimed.
	Workers int `env:"OUTBOX_WORKERS" default:"2" usage:"outbox claim loops per relay"`
	// PublishTimeout bounds the wait for a batch's PubAcks (default 5s).
	PublishTimeout time.Duration `env:"OUTBOX_PUBLISH_TIMEOUT" default:"5s" usage:"wait for a batch's JetStream PubAcks"`
	// Handoff is how long the poll leaves a new row, as Add wrote it, to
	// Send before it publishes the row itself (default 10s): the rows of a
	// commit whose Send was skipped, failed or never came (a crash) are
	// published a hand-off after their commit. It must be at least twice
	// PublishTimeout, so that the poll does not publish again what Send is
	// still waiting a PubAck for, and it counts in RetrySpan.
	Handoff time.Duration `env:"OUTBOX_HANDOFF" default:"10s" usage:"how long the safety-net poll leaves a new outbox row to the publish on commit (Send) before publishing it itself"`
	// ClaimLease is how long a claimed batch is hidden from the other
	// relays while it is published (default 30s). A relay that dies with a
	// batch claimed leaves it to be published again after the lease, inside
	// JetStream's duplicate window. It must exceed twice PublishTimeout.
	ClaimLease time.Duration `env:"OUTBOX_CLAIM_LEASE" default:"30s" usage:"how long a claimed batch is hidden from the other relays while it is published; a relay that dies leaves it to the others after this"`
	// BaseBackoff and MaxBackoff shape the retry delay after a failed
	// publish: min(MaxBackoff, BaseBackoff·2^(retry-1)), of which a random
	// half is jitter (defaults 1s and 60s).
	BaseBackoff time.Duration `env:"OUTBOX_BASE_BACKOFF" default:"1s" usage:"first retry delay after a failed publish"`
	MaxBackoff  time.Duration `env:"OUTBOX_MAX_BACKOFF" default:"1m" usage:"cap of the exponential publish retry delay"`
	// MaxRetries is how many failed publishes turn a row failed (default 8).
	// An outage does not count (see the package doc): the relay pauses, and
	// a publish it cuts off is deferred, so an outage cannot exhaust it.
	MaxRetries int `env:"OUTBOX_MAX_RETRIES" default:"8" usage:"failed publishes before a message is marked failed (redrive it)"`
	// PollSchedule is the robfig/cron spec of the safety-net poll that
	// publishes the rows whose hand-off, backoff or lease has passed
	// (default "@every 1s").
	PollSchedule string `env:"OUTBOX_POLL_SCHEDULE" default:"@every 1s" usage:"cron spec of the relay's safety-net poll"`
	// CleanupSchedule, Retention and CleanupBatch drive the job that deletes
	// sent rows older than Retention, CleanupBatch rows per statement
	// (defaults "@every 10m", 7 days, 1000).
	CleanupSchedule string        `env:"OUTBOX_CLEANUP_SCHEDULE" default:"@every 10m" usage:"cron spec of the sent-row cleanup"`
	Retention       time.Duration `env:"OUTBOX_RETENTION" default:"168h" usage:"how long sent outbox rows are kept"`
	CleanupBatch    int           `env:"OUTBOX_CLEANUP_BATCH" default:"1000" usage:"rows deleted per cleanup statement"`

	// SubjectPrefix is put before every row's subject when it is published
	// (events.Config.SubjectPrefix, which the platform passes): the rows
	// keep the plain subjects of pkg/events.
	SubjectPrefix string `env:"-"`

	// TracerProvider starts the span of each publish, continuing the trace
	// stored in the row's headers (see Add); the platform passes the
	// service's. Nil or a no-op provider (tracing off) starts none, and the
	// relay then does no tracing work at all.
	TracerProvider trace.TracerProvider `env:"-"`
}

// Defaults of Config.
const (
	DefaultBatchSize       = 1000
	DefaultWorkers         = 2
	DefaultPublishTimeout  = 5 * time.Second
	DefaultHandoff         = 10 * time.Second
	DefaultClaimLease      = 30 * time.Second
	DefaultBaseBackoff     = time.Second
	DefaultMaxBackoff      = time.Minute
	DefaultMaxRetries      = 8
	DefaultPollSchedule    = "@every 1s"
	DefaultCleanupSchedule = "@every 10m"
	DefaultRetention       = 7 * 24 * time.Hour
	DefaultCleanupBatch    = 1000
)

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	defD := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	def(&c.BatchSize, DefaultBatchSize)
	def(&c.Workers, DefaultWorkers)
	def(&c.MaxRetries, DefaultMaxRetries)
	def(&c.CleanupBatch, DefaultCleanupBatch)
	defD(&c.PublishTimeout, DefaultPublishTimeout)
	defD(&c.Handoff, DefaultHandoff)
	defD(&c.ClaimLease, DefaultClaimLease)
	defD(&c.BaseBackoff, DefaultBaseBackoff)
	defD(&c.MaxBackoff, DefaultMaxBackoff)
	defD(&c.Retention, DefaultRetention)
	if c.PollSchedule == "" {
		c.PollSchedule = DefaultPollSchedule
	}
	if c.CleanupSchedule == "" {
		c.CleanupSchedule = DefaultCleanupSchedule
	}
	return c
}

// Validate reports unusable settings. It also refuses a hand-off and retry
// schedule whose worst case outlasts JetStream's duplicate window: every
// automatic republish must be droppable by the stream (see the package
// doc).
func (c Config) Validate() error {
	var errs []error
	pos := func(name string, ok bool) {
		if !ok {
			errs = append(errs, fmt.Errorf("outbox: %s must be positive", name))
		}
	}
	pos("OUTBOX_BATCH_SIZE", c.BatchSize > 0)
	pos("OUTBOX_WORKERS", c.Workers > 0)
	pos("OUTBOX_MAX_RETRIES", c.MaxRetries > 0)
	pos("OUTBOX_CLEANUP_BATCH", c.CleanupBatch > 0)
	pos("OUTBOX_PUBLISH_TIMEOUT", c.PublishTimeout > 0)
	pos("OUTBOX_BASE_BACKOFF", c.BaseBackoff > 0)
	pos("OUTBOX_RETENTION", c.Retention > 0)
	errs = append(errs,
		config.CheckSchedule("OUTBOX_POLL_SCHEDULE", c.PollSchedule),
		config.CheckSchedule("OUTBOX_CLEANUP_SCHEDULE", c.CleanupSchedule))
	if c.Handoff < 2*c.PublishTimeout {
		errs = append(errs, errors.New("outbox: OUTBOX_HANDOFF must be at least twice OUTBOX_PUBLISH_TIMEOUT, or the poll would publish again what Send is still waiting a PubAck for"))
	}
	if c.ClaimLease < 2*c.PublishTimeout {
		errs = append(errs, errors.New("outbox: OUTBOX_CLAIM_LEASE must be at least twice OUTBOX_PUBLISH_TIMEOUT, or a batch still publishing could be claimed again"))
	}
	if c.MaxBackoff < c.BaseBackoff {
		errs = append(errs, errors.New("outbox: OUTBOX_MAX_BACKOFF must be at least OUTBOX_BASE_BACKOFF"))
	}
	if span := c.RetrySpan(); span > events.DuplicateWindow {
		errs = append(errs, fmt.Errorf("outbox: retry span %s (hand-off included) exceeds the JetStream duplicate window %s; lower OUTBOX_HANDOFF, OUTBOX_MAX_RETRIES or OUTBOX_MAX_BACKOFF", span, events.DuplicateWindow))
	}
	return errors.Join(errs...)
}

// RetrySpan is the longest time between a row's first and last automatic
// publish attempt that reached NATS: Send's at the commit, the poll's first
// a hand-off later, then the un-jittered backoffs, plus one publish timeout
// per attempt of the poll. Outages come on top of it.
func (c Config) RetrySpan() time.Duration {
	span := c.Handoff
	for i := 1; i < c.MaxRetries; i++ {
		span += c.backoffCeiling(i)
	}
	return span + time.Duration(c.MaxRetries)*c.PublishTimeout
}

// backoffCeiling is the delay before attempt retry+1 without jitter.
func (c Config) backoffCeiling(retry int) time.Duration {
	d := c.BaseBackoff
	for i := 1; i < retry && d < c.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, c.MaxBackoff)
}
