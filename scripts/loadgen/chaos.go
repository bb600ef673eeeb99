package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"sync"
	"time"
)

// Fault is one fault the chaos schedule injected.
type Fault struct {
	At   float64 `json:"at_s"` // seconds after the load started
	Kind string  `json:"kind"`
	What string  `json:"what"`
}

// chaos injects faults into a rig while the load runs. Which fault, on
// which process, and the waits between them are drawn from --seed, so a
// seed repeats the schedule (what each fault hits in flight depends on the
// moment, as with any real crash).
type chaos struct {
	r     *rig
	rng   *rand.Rand
	every time.Duration
	began time.Time
	log   io.Writer

	mu     sync.Mutex
	faults []Fault
	wg     sync.WaitGroup // restarts in progress
}

// The faults and their weights.
var faultKinds = []struct {
	kind   string
	weight int
}{
	{"kill service", 5},          // SIGKILL one replica of a service, restart it 0.5–3 s later
	{"lose commit acks", 2},      // the fault proxy drops the next 1–3 COMMIT replies of the coupon service
	{"lose platform answers", 2}, // the simulator loses the first 2xx answers of the next charges' notifications
	{"notification storm", 1},    // the next charges are notified by concurrent copies, then replayed
	{"restart nats", 1},          // SIGKILL NATS (JetStream on disk), restart it 1 s later
	{"restart redis", 1},         // SIGKILL Redis (nothing on disk), restart it 1 s later
}

func newChaos(r *rig, seed int64, every time.Duration, log io.Writer) *chaos {
	return &chaos{r: r, rng: rand.New(rand.NewPCG(uint64(seed), 0x5eed)), every: every, log: log}
}

// run injects faults until ctx ends, then waits for every restart.
func (c *chaos) run(ctx context.Context) {
	c.began = time.Now()
	total := 0
	for _, k := range faultKinds {
		total += k.weight
	}
	for {
		wait := time.Duration((0.5 + c.rng.Float64()) * float64(c.every))
		select {
		case <-ctx.Done():
			c.wg.Wait()
			return
		case <-time.After(wait):
		}
		n := c.rng.IntN(total)
		kind := ""
		for _, k := range faultKinds {
			if n < k.weight {
				kind = k.kind
				break
			}
			n -= k.weight
		}
		c.inject(kind)
	}
}

func (c *chaos) record(kind, format string, args ...any) {
	f := Fault{At: time.Since(c.began).Round(100 * time.Millisecond).Seconds(), Kind: kind, What: fmt.Sprintf(format, args...)}
	c.mu.Lock()
	c.faults = append(c.faults, f)
	c.mu.Unlock()
	fmt.Fprintf(c.log, "\nchaos %6.1fs  %-22s %s\n", f.At, kind, f.What)
}

// inject applies one fault. Every draw from rng happens here, in the
// schedule's goroutine, so the sequence depends on --seed alone.
func (c *chaos) inject(kind string) {
	switch kind {
	case "kill service":
		var services []*proc
		for _, p := range c.r.procs {
			if p.kind == "service" {
				services = append(services, p)
			}
		}
		p := services[c.rng.IntN(len(services))]
		down := time.Duration(500+c.rng.IntN(2500)) * time.Millisecond
		c.killAndRestart(kind, p, down)
	case "restart nats":
		c.killAndRestart(kind, c.r.byName["nats-server"], time.Second)
	case "restart redis":
		c.killAndRestart(kind, c.r.byName["redis-server"], time.Second)
	case "lose commit acks":
		n := 1 + c.rng.IntN(3)
		st, body := post(c.r.targets.FaultProxyAdmin+"/arm", c.r.targets.AdminToken, fmt.Sprintf(`{"drop_commit_acks":%d}`, n))
		var stats struct {
			Armed int `json:"armed"`
		}
		if st != http.StatusOK || json.Unmarshal([]byte(body), &stats) != nil {
			c.record(kind, "arming the fault proxy failed: %d %s", st, body)
			return
		}
		c.record(kind, "fault proxy armed: the coupon service's next %d COMMIT acknowledgements are lost (proxy: armed %d)", n, stats.Armed)
	case "lose platform answers":
		n, lost := 1+c.rng.IntN(5), 1+c.rng.IntN(3)
		for range n {
			post(c.r.targets.PSP+"/sim/plans", c.r.targets.PSPAdminToken, fmt.Sprintf(`{"next_charge":true,"lost_answers":%d}`, lost))
		}
		c.record(kind, "the next %d charges: the platform loses the first %d 2xx answers of each notification and retries", n, lost)
	case "notification storm":
		n, copies := 1+c.rng.IntN(3), 2+c.rng.IntN(9)
		for range n {
			post(c.r.targets.PSP+"/sim/plans", c.r.targets.PSPAdminToken, fmt.Sprintf(`{"next_charge":true,"mode":"storm","copies":%d,"replays":2,"lost_answers":1}`, copies))
		}
		c.record(kind, "the next %d charges: %d concurrent copies of the notification, 2 late replays, one answer lost", n, copies)
	}
}

// killAndRestart SIGKILLs p now and starts it again after down, unless it
// is down already (a restart still pending).
func (c *chaos) killAndRestart(kind string, p *proc, down time.Duration) {
	if !p.running() {
		c.record(kind, "%s is already down; skipped", p.name)
		return
	}
	p.kill()
	c.record(kind, "SIGKILL %s; restart in %s", p.name, down)
	c.wg.Go(func() {
		time.Sleep(down)
		began := time.Now()
		if err := p.start(context.Background(), c.r.dir); err != nil {
			c.record("restart failed", "%s: %v", p.name, err)
			return
		}
		c.record("restarted", "%s ready %.1fs after its start", p.name, time.Since(began).Seconds())
	})
}

// summary counts the faults by kind.
func (c *chaos) summary() (map[string]int, []Fault) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for _, f := range c.faults {
		out[f.Kind]++
	}
	fs := append([]Fault(nil), c.faults...)
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].At < fs[j].At })
	return out, fs
}

// post sends a small JSON POST and returns the status and body.
func post(url, token, body string) (int, string) {
	req, err := http.NewRequest("POST", url, bytes.NewBufferString(body))
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := readyClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
	return resp.StatusCode, string(bytes.TrimSpace(b))
}
