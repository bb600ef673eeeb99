package inbox

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Run consumes until ctx ends, then lets in-flight handlers finish. While
// MySQL cannot be reached it pauses instead (see Outages in the package
// doc).
func (c *Consumer) Run(ctx context.Context) error {
	p := &pipeline{
		c:         c,
		jobs:      make(chan jetstream.Msg),
		quit:      make(chan struct{}),
		begun:     make(chan struct{}),
		unsettled: map[jetstream.Msg]struct{}{},
	}
	// Handlers run on a context that outlives ctx, so a shutdown lets the
	// transactions in flight commit and ack instead of rolling back.
	hctx := context.WithoutCancel(ctx)
	var wg sync.WaitGroup
	for range c.cfg.Workers {
		wg.Go(func() { p.work(hctx) })
	}
	defer func() {
		close(p.quit)
		wg.Wait()
		p.release()
	}()
	for first := true; ; first = false {
		begun := p.pausing()
		cc, err := c.consume(ctx, p, first)
		if err != nil {
			return err
		}
		if cc == nil { // ctx ended while Consume was retried
			return nil
		}
		select {
		case <-ctx.Done():
			// Drain hands the already pulled messages to the workers.
			c.drain(cc)
			return nil
		case <-begun:
			// Drain hands the already pulled messages to the callback,
			// which holds them: none is left to AckWait in the client.
			c.drain(cc)
			// Only now does it pull nothing, which is what the gauge says.
			c.m.paused.WithLabelValues(c.cfg.Name).Set(1)
			if !p.await(ctx) {
				return nil
			}
			// The same deliveries go to the workers again, first.
			for _, m := range p.resume() {
				p.dispatch(m, ctx.Done())
			}
		}
	}
}

// consume starts pulling, through p. The first attempt's error is Run's;
// after a pause, Consume is retried every second until ctx ends (a nil
// ConsumeContext), so that a consumer that paused never stops for good.
func (c *Consumer) consume(ctx context.Context, p *pipeline, first bool) (jetstream.ConsumeContext, error) {
	for {
		cc, err := c.cons.Consume(p.receive,
			jetstream.PullMaxMessages(2*c.cfg.Workers),
			jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
				c.log.Warn("inbox consume error", "err", err)
			}))
		switch {
		case err == nil:
			return cc, nil
		case first:
			return nil, fmt.Errorf("inbox: consume %s: %w", c.cfg.Name, err)
		}
		c.log.Warn("inbox could not pull again after a pause; retrying", "err", err)
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(time.Second):
		}
	}
}

// drain stops pulling and waits until the messages already pulled have
// reached the callback, or AckWait has passed.
func (c *Consumer) drain(cc jetstream.ConsumeContext) {
	cc.Drain()
	select {
	case <-cc.Closed():
	case <-time.After(c.cfg.AckWait):
		cc.Stop()
	}
}

// pipeline is what one Run shares between the pull callback, the workers
// and the pause. Every message it received is in unsettled until it is
// acked, nak'd or terminated; while paused, the messages no worker has are
// in held.
type pipeline struct {
	c    *Consumer
	jobs chan jetstream.Msg
	// quit ends the workers and unblocks a callback waiting for one. A
	// message dropped that way stays unsettled, and release naks it. jobs
	// itself is never closed, so a late callback cannot send on a closed
	// channel.
	quit chan struct{}

	mu        sync.Mutex
	since     time.Time     // when the pause began; zero while running
	begun     chan struct{} // closed when a pause begins, renewed when it ends
	held      []jetstream.Msg
	unsettled map[jetstream.Msg]struct{}
}

// receive is the pull callback.
func (p *pipeline) receive(m jetstream.Msg) {
	p.mu.Lock()
	p.unsettled[m] = struct{}{}
	p.mu.Unlock()
	p.dispatch(m, p.quit)
}

// dispatch hands m to a worker, or holds it while paused, or leaves it
// unsettled when done ends first.
func (p *pipeline) dispatch(m jetstream.Msg, done <-chan struct{}) {
	for {
		begun := p.pausing()
		select {
		case p.jobs <- m:
			return
		case <-begun:
			if p.holdIfPaused(m) {
				return
			}
			// The pause ended before m was held: try again.
		case <-done:
			return
		}
	}
}

func (p *pipeline) work(ctx context.Context) {
	for {
		select {
		case m := <-p.jobs:
			msg, r := p.c.deliver(ctx, m)
			if r.out == Held {
				p.pauseAndHold(m, r.err)
				continue
			}
			p.c.settle(m, msg, r)
			p.mu.Lock()
			delete(p.unsettled, m)
			p.mu.Unlock()
		case <-p.quit:
			return
		}
	}
}

// pausing returns the channel closed when the next pause begins (closed
// already during one).
func (p *pipeline) pausing() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.begun
}

// pauseAndHold keeps m, whose delivery found MySQL unreachable (cause),
// until the pause ends, and begins the pause if none is on.
func (p *pipeline) pauseAndHold(m jetstream.Msg, cause error) {
	c := p.c
	p.mu.Lock()
	if p.since.IsZero() {
		p.since = time.Now()
		close(p.begun)
		c.m.pauses.WithLabelValues(c.cfg.Name).Inc()
		c.log.Warn("inbox consumer paused: MySQL cannot be reached; it pulls nothing and holds its deliveries, their attempts unspent, until MySQL answers",
			"err", cause, "unsettled", len(p.unsettled))
	}
	p.holdLocked(m)
}

// holdIfPaused keeps m until the pause ends, if one is on, and reports
// whether it did.
func (p *pipeline) holdIfPaused(m jetstream.Msg) bool {
	p.mu.Lock()
	if p.since.IsZero() {
		p.mu.Unlock()
		return false
	}
	p.holdLocked(m)
	return true
}

// holdLocked adds m to the held messages and unlocks p.mu. A held message's
// AckWait starts again at once.
func (p *pipeline) holdLocked(m jetstream.Msg) {
	p.held = append(p.held, m)
	p.c.m.held.WithLabelValues(p.c.cfg.Name).Set(float64(len(p.held)))
	p.mu.Unlock()
	p.keepAlive(m)
}

// await keeps the unsettled messages alive and pings MySQL until it
// answers (true) or ctx ends (false).
func (p *pipeline) await(ctx context.Context) bool {
	heartbeat := time.NewTicker(p.c.cfg.AckWait / 3)
	defer heartbeat.Stop()
	delay := probeFirst
	probe := time.NewTimer(jitter(delay))
	defer probe.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-heartbeat.C:
			p.keepAlive(p.unsettledMessages()...)
		case <-probe.C:
			if p.c.ping(ctx) == nil {
				return true
			}
			delay = min(2*delay, probeMax)
			probe.Reset(jitter(delay))
		}
	}
}

// resume ends the pause and returns the messages it held, in the order
// they were held.
func (p *pipeline) resume() []jetstream.Msg {
	c := p.c
	p.mu.Lock()
	defer p.mu.Unlock()
	held, since := p.held, p.since
	p.held, p.since, p.begun = nil, time.Time{}, make(chan struct{})
	c.m.paused.WithLabelValues(c.cfg.Name).Set(0)
	c.m.held.WithLabelValues(c.cfg.Name).Set(0)
	c.log.Info("inbox consumer resumed: MySQL answers; the held deliveries run again",
		"paused_for", time.Since(since).Round(time.Millisecond), "held", len(held))
	return held
}

// release naks every message still unsettled when Run ends (held by a
// pause, or never handed to a worker), so that another replica gets it now
// rather than after AckWait. The nak costs a delivery, not a refusal.
func (p *pipeline) release() {
	c := p.c
	p.mu.Lock()
	ms := make([]jetstream.Msg, 0, len(p.unsettled))
	for m := range p.unsettled {
		ms = append(ms, m)
	}
	clear(p.unsettled)
	wasPaused := !p.since.IsZero()
	p.held, p.since = nil, time.Time{}
	p.mu.Unlock()
	c.m.paused.WithLabelValues(c.cfg.Name).Set(0)
	c.m.held.WithLabelValues(c.cfg.Name).Set(0)
	if wasPaused {
		c.log.Warn("inbox consumer stopped while paused; its held deliveries go back to the server", "held", len(ms))
	}
	for _, m := range ms {
		if err := m.Nak(); err != nil {
			c.log.Warn("inbox could not hand a delivery back at shutdown; the server redelivers it after AckWait", "err", err)
		}
	}
}

func (p *pipeline) unsettledMessages() []jetstream.Msg {
	p.mu.Lock()
	defer p.mu.Unlock()
	ms := make([]jetstream.Msg, 0, len(p.unsettled))
	for m := range p.unsettled {
		ms = append(ms, m)
	}
	return ms
}

// keepAlive restarts the AckWait of each message, without counting a
// delivery. One that fails (NATS down) may be redelivered, which the dedup
// row absorbs.
func (p *pipeline) keepAlive(ms ...jetstream.Msg) {
	for _, m := range ms {
		if err := m.InProgress(); err != nil {
			p.c.log.Debug("inbox could not extend a held delivery's AckWait", "err", err)
		}
	}
}

// jitter returns a duration between d/2 and d, so that the consumers of
// every replica do not ping in step.
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}
