package idempotency

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/problem"
)

// Config tunes the middleware and its archiver. A service embeds it in its
// own configuration; DefaultConfig gives the documented defaults.
type Config struct {
	LockTTL     time.Duration `env:"IDEMPOTENCY_LOCK_TTL" default:"60s" usage:"how long a request in progress holds its key before a retry may take it over; keep it above the longest request"`
	Retention   time.Duration `env:"IDEMPOTENCY_RETENTION" default:"24h" usage:"how long a completed key is replayed before it is forgotten and archived"`
	EntryTTL    time.Duration `env:"IDEMPOTENCY_ENTRY_TTL" default:"1h" usage:"lifetime of the Redis entry-layer marker of a key"`
	EntryPrefix string        `env:"IDEMPOTENCY_REDIS_PREFIX" default:"idem:" usage:"Redis key prefix of the entry layer"`
	// ReplayHeaders are the response headers stored and replayed with the body.
	ReplayHeaders []string `env:"IDEMPOTENCY_REPLAY_HEADERS" default:"Content-Type,Location" usage:"response headers stored and replayed with the body"`
	// The archiver deletes up to ArchiveBatch × ArchiveMaxBatches records
	// per ArchiveSchedule tick; the defaults allow a million a minute
	// (16,000/s, where a deletion runs at about 14,000 records/s on a
	// 2-core machine: BenchmarkArchiver), against the 400 records/s that
	// 200 purchases/s leave.
	ArchiveSchedule   string `env:"IDEMPOTENCY_ARCHIVE_SCHEDULE" default:"@every 1m" usage:"cron schedule of the job deleting expired records"`
	ArchiveBatch      int    `env:"IDEMPOTENCY_ARCHIVE_BATCH" default:"1000" usage:"records deleted per statement by the archiver"`
	ArchiveMaxBatches int    `env:"IDEMPOTENCY_ARCHIVE_MAX_BATCHES" default:"1000" usage:"statements per archiver run; the rest waits for the next run"`

	// Terminal reports whether a response status is a final business outcome
	// to store and replay. Nil means DefaultTerminal.
	Terminal func(status int) bool
}

// DefaultConfig returns the configuration with every default applied.
func DefaultConfig() Config {
	var c Config
	_ = config.LoadFrom(&c, func(string) (string, bool) { return "", false })
	return c
}

// Validate reports every unusable setting, naming its variable.
func (c Config) Validate() error {
	errs := []error{
		config.CheckPositive("IDEMPOTENCY_LOCK_TTL", c.LockTTL),
		config.CheckPositive("IDEMPOTENCY_RETENTION", c.Retention),
		config.CheckPositive("IDEMPOTENCY_ENTRY_TTL", c.EntryTTL),
		config.CheckPositive("IDEMPOTENCY_ARCHIVE_BATCH", c.ArchiveBatch),
		config.CheckPositive("IDEMPOTENCY_ARCHIVE_MAX_BATCHES", c.ArchiveMaxBatches),
	}
	if c.Retention <= c.LockTTL {
		errs = append(errs, fmt.Errorf("config: IDEMPOTENCY_RETENTION=%v must exceed IDEMPOTENCY_LOCK_TTL=%v", c.Retention, c.LockTTL))
	}
	errs = append(errs, config.CheckSchedule("IDEMPOTENCY_ARCHIVE_SCHEDULE", c.ArchiveSchedule))
	return errors.Join(errs...)
}

// DefaultTerminal stores every 1xx–3xx response and the 4xx responses that
// a retry of the same request would get again. It releases the key (the
// retry runs the handler again) on 5xx and on the 4xx statuses that depend
// on timing or on credentials rather than on the request itself, including
// problem.StatusClientClosed (the client gave up before the answer).
func DefaultTerminal(status int) bool {
	switch {
	case status < 400:
		return true
	case status >= 500:
		return false
	}
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusRequestTimeout,
		http.StatusConflict, http.StatusLocked, http.StatusTooEarly, http.StatusTooManyRequests,
		problem.StatusClientClosed:
		return false
	}
	return true
}
