// Package ratelimit is a sliding-window limiter on Redis: at most Limit
// admissions per key in any Window-long interval, shared by every replica.
//
// Each admission is a member of a sorted set scored by its time. One Lua
// script evicts the members older than the window, counts the rest, adds the
// new member when there is room and renews the key's expiry, so concurrent
// callers can never both see room for the last slot. Time comes from the
// Redis server (TIME), so replicas with skewed clocks agree.
package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// slidingScript: KEYS[1] the window set; ARGV[1] window in microseconds,
// ARGV[2] limit, ARGV[3] a unique member suffix. Returns 1 when admitted.
// Times are microseconds since the epoch, exact in Lua's doubles until 2255.
var slidingScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local window = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return 0
end
redis.call('ZADD', KEYS[1], now, now .. '-' .. ARGV[3])
redis.call('PEXPIRE', KEYS[1], math.ceil(window / 1000))
return 1`)

// Limiter admits at most Limit calls per key in any Window.
type Limiter struct {
	rdb    redis.Scripter
	prefix string
	limit  int
	window time.Duration
}

// Config tunes a Limiter.
type Config struct {
	Prefix string        // put before every key, e.g. "ratelimit:orders:"
	Limit  int           // admissions allowed per window, at least 1
	Window time.Duration // the sliding window, at least 1ms
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	if c.Limit < 1 {
		return fmt.Errorf("ratelimit: limit %d is below 1", c.Limit)
	}
	if c.Window < time.Millisecond {
		return fmt.Errorf("ratelimit: window %v is below 1ms", c.Window)
	}
	return nil
}

// New returns a limiter over rdb.
func New(rdb redis.Scripter, cfg Config) (*Limiter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Limiter{rdb: rdb, prefix: cfg.Prefix, limit: cfg.Limit, window: cfg.Window}, nil
}

// Allow reports whether one more call for key fits in the window, and counts
// it when it does. Refused calls are not counted.
func (l *Limiter) Allow(ctx context.Context, key string) (bool, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return false, err
	}
	n, err := slidingScript.Run(ctx, l.rdb, []string{l.prefix + key},
		l.window.Microseconds(), l.limit, hex.EncodeToString(b[:])).Int()
	if err != nil {
		return false, fmt.Errorf("ratelimit: %s: %w", key, err)
	}
	return n == 1, nil
}
