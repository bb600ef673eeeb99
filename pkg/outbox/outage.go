package outbox

import (
	"sync"
	"time"
)

// outageLogEvery spaces the warnings of a long outage.
const outageLogEvery = time.Minute

// outageState is what a relay's workers know of an outage.
type outageState struct {
	mu      sync.Mutex
	since   time.Time // the first poll paused by the outage; zero when there is none
	logged  time.Time // the last warning
	skipped int       // polls paused since the last warning
}

// unavailable returns why no publish can succeed now, or "" when one may:
// the NATS connection is down. It reads no row.
func (r *Relay) unavailable() string {
	if nc := r.js.Conn(); nc != nil && !nc.IsConnected() {
		return "NATS not connected (" + nc.Status().String() + ")"
	}
	return ""
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
