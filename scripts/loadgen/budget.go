package main

import (
	"math"
	"sync"
	"time"
)

// retryBudget bounds a client's retries to a share of its first tries, as
// a well-made client library does: every first try deposits ratio tokens,
// every retry takes one, and a retry that finds less than one is not made
// (the request fails instead). A trickle of floor tokens a second lets a
// quiet client retry at all; the bucket holds at most burst. Under a
// failure that lasts, the clients' retries are then about ratio × their
// traffic, where retrying every request would multiply it.
type retryBudget struct {
	ratio, floor, burst float64
	now                 func() time.Time

	mu     sync.Mutex
	tokens float64
	last   time.Time
	denied int
}

func newRetryBudget(ratio, floor, burst float64, now func() time.Time) *retryBudget {
	return &retryBudget{ratio: ratio, floor: floor, burst: burst, now: now, tokens: burst, last: now()}
}

// refill adds the floor's tokens since the last call; mu must be held.
func (b *retryBudget) refill() {
	t := b.now()
	b.tokens = math.Min(b.burst, b.tokens+b.floor*t.Sub(b.last).Seconds())
	b.last = t
}

// firstTry records a first try.
func (b *retryBudget) firstTry() {
	b.mu.Lock()
	b.refill()
	b.tokens = math.Min(b.burst, b.tokens+b.ratio)
	b.mu.Unlock()
}

// retry reports whether a retry may be made now, and takes its token.
func (b *retryBudget) retry() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill()
	// Deposits of a fraction do not add up to whole tokens exactly in
	// floating point (ten of 0.2 make 1.999…).
	if b.tokens < 1-1e-9 {
		b.denied++
		return false
	}
	b.tokens = max(0, b.tokens-1)
	return true
}

// deniedRetries returns the retries the budget refused.
func (b *retryBudget) deniedRetries() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.denied
}
