// Package formtoken issues one-time form tokens: a page fetches a token, the
// form submits it, and the server accepts each token exactly once.
//
// It guards synchronous double submits (a double click, a browser back and
// resubmit). It is useless for asynchronous duplicates (message redelivery,
// payment callbacks, scheduled retries), which never carry a token; those are
// guarded by unique keys and state machines.
package formtoken

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// consumeScript deletes the token only when it is bound to the same subject,
// and reports whether it did. GET and DEL in one script: two submits of the
// same token can never both see it present.
var consumeScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)

// Config tunes a Store.
type Config struct {
	// Prefix is put before every token key, e.g. "formtoken:order:".
	Prefix string
	// TTL is how long an unused token stays valid.
	TTL time.Duration
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	if c.TTL < time.Second {
		return fmt.Errorf("formtoken: TTL %v is below 1s", c.TTL)
	}
	return nil
}

// Store issues and consumes tokens.
type Store struct {
	rdb redis.Cmdable
	cfg Config
}

// New returns a store over rdb.
func New(rdb redis.Cmdable, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Store{rdb: rdb, cfg: cfg}, nil
}

// Issue returns a fresh token bound to subject (the user it was issued to).
// The value and its expiry are written by one SET … EX, so a crash can never
// leave a token that lives forever.
func (s *Store) Issue(ctx context.Context, subject string) (string, error) {
	if subject == "" {
		return "", errors.New("formtoken: empty subject")
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	token := hex.EncodeToString(b[:])
	if err := s.rdb.Set(ctx, s.cfg.Prefix+token, subject, s.cfg.TTL).Err(); err != nil {
		return "", fmt.Errorf("formtoken: issue: %w", err)
	}
	return token, nil
}

// Consume reports whether token was issued to subject and not consumed yet,
// and consumes it. Of any number of concurrent calls with one token, at most
// one returns true. A token presented by another subject is left untouched.
func (s *Store) Consume(ctx context.Context, subject, token string) (bool, error) {
	if token == "" || subject == "" {
		return false, nil
	}
	n, err := consumeScript.Run(ctx, s.rdb, []string{s.cfg.Prefix + token}, subject).Int()
	if err != nil {
		return false, fmt.Errorf("formtoken: consume: %w", err)
	}
	return n == 1, nil
}
