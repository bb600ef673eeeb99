package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Hint is the entry layer's answer. It is a hint, never the truth: the
// database decides every outcome, so a flushed or lagging Redis only costs a
// little speed, never correctness.
type Hint int

// Entry layer answers.
const (
	// HintFirst: Redis has not seen the key (or is unavailable).
	HintFirst Hint = iota + 1
	// HintDuplicate: Redis saw the key with the same fingerprint.
	HintDuplicate
	// HintMismatch: Redis saw the key with another fingerprint.
	HintMismatch
)

// entryScript sets the key to the fingerprint unless it exists, and tells
// first (1), duplicate (2) or fingerprint mismatch (0) in one round trip,
// with the existing key's remaining time to live in milliseconds, from
// which the caller reads how long ago the key was first seen.
var entryScript = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[2]) then
  return {1, 0}
end
local ttl = redis.call('PTTL', KEYS[1])
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return {2, ttl}
end
return {0, ttl}`)

// forgetScript deletes the key only while it holds our fingerprint.
var forgetScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)

// Entry is the Redis front of the middleware: it spots most duplicates in one
// round trip, so they are answered from a read instead of contending on the
// table's unique key.
type Entry struct {
	rdb    redis.Scripter
	prefix string
	ttl    time.Duration
}

// NewEntry returns an entry layer over rdb; keys are prefix + a hash of the
// scope and key, and live for ttl.
func NewEntry(rdb redis.Scripter, prefix string, ttl time.Duration) *Entry {
	return &Entry{rdb: rdb, prefix: prefix, ttl: ttl}
}

func (e *Entry) redisKey(scope, key string) string {
	sum := sha256.Sum256([]byte(scope + "\x00" + key))
	return e.prefix + hex.EncodeToString(sum[:])
}

// Check records (scope, key) with fingerprint fp and answers what Redis knew.
func (e *Entry) Check(ctx context.Context, scope, key, fp string) (Hint, error) {
	h, _, err := e.CheckAge(ctx, scope, key, fp)
	return h, err
}

// CheckAge is Check that also tells, for a key Redis had seen, how long ago
// it was first seen (zero for HintFirst).
func (e *Entry) CheckAge(ctx context.Context, scope, key, fp string) (Hint, time.Duration, error) {
	secs := max(int64(e.ttl/time.Second), 1)
	res, err := entryScript.Run(ctx, e.rdb, []string{e.redisKey(scope, key)}, fp, secs).Int64Slice()
	if err != nil {
		return HintFirst, 0, fmt.Errorf("idempotency: entry check: %w", err)
	}
	if len(res) != 2 {
		return HintFirst, 0, fmt.Errorf("idempotency: entry check: unexpected answer %v", res)
	}
	age := time.Duration(secs)*time.Second - time.Duration(res[1])*time.Millisecond
	switch res[0] {
	case 1:
		return HintFirst, 0, nil
	case 2:
		return HintDuplicate, age, nil
	default:
		return HintMismatch, age, nil
	}
}

// Forget removes the entry of a released claim, so the retry goes straight
// to the database insert.
func (e *Entry) Forget(ctx context.Context, scope, key, fp string) error {
	if err := forgetScript.Run(ctx, e.rdb, []string{e.redisKey(scope, key)}, fp).Err(); err != nil {
		return fmt.Errorf("idempotency: entry forget: %w", err)
	}
	return nil
}
