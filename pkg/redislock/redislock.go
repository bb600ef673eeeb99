// Package redislock is a Redis lock for work that must run on one replica at
// a time, such as a cron job every replica schedules.
//
// A lock is a key set with SET NX PX to a random token. Only the holder of
// the token may extend or release it: both go through a Lua script that
// compares the token before acting, so a holder whose lock already expired
// can never delete or extend the lock another replica took meanwhile.
//
// A lock is mutual exclusion, not idempotency: once it is released, a late
// duplicate runs again. Jobs run under it must still be safe to repeat.
package redislock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotAcquired means another holder has the lock.
var ErrNotAcquired = errors.New("redislock: held by another owner")

// ErrLost means the lock expired or was taken over while it was held.
var ErrLost = errors.New("redislock: lock lost")

// releaseScript deletes the key only when it still holds our token.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)

// refreshScript extends the key's expiry only when it still holds our token.
var refreshScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`)

// Client takes locks named under a key prefix.
type Client struct {
	rdb    redis.Cmdable
	prefix string
}

// New returns a client whose lock keys are prefix + name (e.g. "lock:").
func New(rdb redis.Cmdable, prefix string) *Client {
	return &Client{rdb: rdb, prefix: prefix}
}

// Lock is one held lock.
type Lock struct {
	c     *Client
	key   string
	token string
}

// Acquire takes the lock name for ttl, or returns ErrNotAcquired at once when
// someone else holds it. It never waits.
func (c *Client) Acquire(ctx context.Context, name string, ttl time.Duration) (*Lock, error) {
	if ttl < time.Millisecond {
		return nil, fmt.Errorf("redislock: ttl %v is below 1ms", ttl)
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	l := &Lock{c: c, key: c.prefix + name, token: hex.EncodeToString(b[:])}
	ok, err := c.rdb.SetNX(ctx, l.key, l.token, ttl).Result()
	if err != nil {
		return nil, fmt.Errorf("redislock: acquire %s: %w", name, err)
	}
	if !ok {
		return nil, ErrNotAcquired
	}
	return l, nil
}

// Refresh extends the lock to ttl from now; ErrLost if it is no longer ours.
func (l *Lock) Refresh(ctx context.Context, ttl time.Duration) error {
	n, err := refreshScript.Run(ctx, l.c.rdb, []string{l.key}, l.token, ttl.Milliseconds()).Int()
	if err != nil {
		return fmt.Errorf("redislock: refresh %s: %w", l.key, err)
	}
	if n != 1 {
		return ErrLost
	}
	return nil
}

// Release deletes the lock if it is still ours; ErrLost otherwise.
func (l *Lock) Release(ctx context.Context) error {
	n, err := releaseScript.Run(ctx, l.c.rdb, []string{l.key}, l.token).Int()
	if err != nil {
		return fmt.Errorf("redislock: release %s: %w", l.key, err)
	}
	if n != 1 {
		return ErrLost
	}
	return nil
}

// Run takes the lock name, runs fn while holding it and releases it. The lock
// is refreshed every ttl/3 while fn runs, so ttl only bounds how long a
// crashed holder blocks the others. When a refresh finds the lock lost, fn's
// context is cancelled and Run returns an error wrapping ErrLost. When another
// replica holds the lock, fn does not run and Run returns ErrNotAcquired.
func (c *Client) Run(ctx context.Context, name string, ttl time.Duration, fn func(ctx context.Context) error) error {
	l, err := c.Acquire(ctx, name, ttl)
	if err != nil {
		return err
	}
	fnCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	renewDone := make(chan struct{})
	go func() {
		defer close(renewDone)
		t := time.NewTicker(ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-fnCtx.Done():
				return
			case <-t.C:
				// A refresh that fails on a network error is retried on the
				// next tick; only a definite "not ours" stops fn.
				if err := l.Refresh(fnCtx, ttl); errors.Is(err, ErrLost) {
					cancel(ErrLost)
					return
				}
			}
		}
	}()
	fnErr := fn(fnCtx)
	lost := errors.Is(context.Cause(fnCtx), ErrLost)
	cancel(nil)
	<-renewDone
	if lost {
		return errors.Join(fmt.Errorf("redislock: %s: %w", name, ErrLost), fnErr)
	}
	relErr := l.Release(context.WithoutCancel(ctx))
	if errors.Is(relErr, ErrLost) {
		relErr = fmt.Errorf("redislock: %s expired before release: %w", name, ErrLost)
	}
	return errors.Join(fnErr, relErr)
}
