package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// stats collects what the clients saw: every try (when it was sent, how
// long it took, what it got), failed and refused tries by step and kind,
// retries, the purchases' outcomes, and when each purchase started.
type stats struct {
	mu        sync.Mutex
	tries     []tryRec
	failures  map[string]int // "step: kind" → tries that got no answer, or one a client retries (not a refusal)
	refusals  map[string]int // "step: status" → tries refused (503, 429)
	retries   map[string]int // step → tries after the first
	outcomes  map[string]int // purchase outcome → purchases
	anomalies []string       // what a client saw that must never happen (kept: the first 20)
	anomalyN  int
	purchases map[uint64]purchaseRec // purchase number → when and in which phase it started
	// customerTries counts the customers' tries, for the cost meter.
	customerTries int
}

// tryClass is what one try got.
type tryClass uint8

const (
	// tryAnswered is an answer the client keeps (2xx, 4xx).
	tryAnswered tryClass = iota
	// tryRefused is a 503 or a 429: the server declined the work.
	tryRefused
	// tryRetried is another answer a client retries: 500, 502, 504, 409
	// in progress, 409 price_changed.
	tryRetried
	// tryFailed is no answer: a timeout, a refused or cut connection.
	tryFailed
)

// tryRec is one try as the client saw it.
type tryRec struct {
	sent     time.Time
	took     time.Duration
	step     string
	class    tryClass
	status   int    // the answer's status; 0 when there was none
	kind     string // for no answer: timeout, connection, cancelled
	customer bool   // a customer's request, not the operator's setup or checks
}

// what names the try's outcome: its status, or why there was none.
func (t tryRec) what() string {
	if t.status == 0 {
		return t.kind
	}
	return strconv.Itoa(t.status)
}

// purchaseRec is when a purchase started, and in which phase.
type purchaseRec struct {
	at    time.Time
	phase int
}

func newStats() *stats {
	return &stats{failures: map[string]int{}, refusals: map[string]int{}, retries: map[string]int{}, outcomes: map[string]int{}, purchases: map[uint64]purchaseRec{}}
}

// observe records one try; kind names a failure or a refusal ("" for an
// answer kept).
func (s *stats) observe(step string, sent time.Time, took time.Duration, class tryClass, status int, customer bool, kind string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := tryRec{sent: sent, took: took, step: step, class: class, status: status, customer: customer}
	if status == 0 {
		t.kind = kind
	}
	s.tries = append(s.tries, t)
	if customer {
		s.customerTries++
	}
	switch class {
	case tryRefused:
		s.refusals[step+": "+kind]++
	case tryRetried, tryFailed:
		s.failures[step+": "+kind]++
	}
}

func (s *stats) retry(step string) {
	s.mu.Lock()
	s.retries[step]++
	s.mu.Unlock()
}

func (s *stats) outcome(o string) {
	s.mu.Lock()
	s.outcomes[o]++
	s.mu.Unlock()
}

// started records that purchase i started now, in phase.
func (s *stats) started(i uint64, phase int) {
	s.mu.Lock()
	s.purchases[i] = purchaseRec{at: time.Now(), phase: phase}
	s.mu.Unlock()
}

// anomaly records an answer a correct system never gives (two answers
// for one Idempotency-Key that name different orders, say): an invariant
// broken on the client's side.
func (s *stats) anomaly(format string, args ...any) {
	s.mu.Lock()
	s.anomalyN++
	if len(s.anomalies) < 20 {
		s.anomalies = append(s.anomalies, fmt.Sprintf(format, args...))
	}
	s.mu.Unlock()
}

// clientTries returns the customers' tries so far.
func (s *stats) clientTries() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return float64(s.customerTries)
}

// snapshot returns the counts the progress line shows.
func (s *stats) snapshot() (outcomes map[string]int, failed int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.failures {
		failed += n
	}
	for _, n := range s.refusals {
		failed += n
	}
	return maps.Clone(s.outcomes), failed
}

// Percentiles summarises a set of durations, in milliseconds.
type Percentiles struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

func percentiles(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) float64 {
		i := int(q*float64(len(s))+0.5) - 1
		i = max(0, min(i, len(s)-1))
		return float64(s[i].Microseconds()) / 1000
	}
	return Percentiles{Count: len(s), P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: float64(s[len(s)-1].Microseconds()) / 1000}
}

// progress prints a live line every second until stop is closed: elapsed,
// purchases started and settled, the rate, and failed tries by kind. On a
// terminal the line is rewritten in place; elsewhere one line every five
// seconds.
func progress(w io.Writer, tty bool, st *stats, began time.Time, total time.Duration, paid func() int, stop <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastPrint := time.Time{}
	for {
		select {
		case <-stop:
			if tty {
				fmt.Fprintln(w)
			}
			return
		case now := <-tick.C:
			out, failed := st.snapshot()
			el := now.Sub(began)
			started := out["started"]
			line := fmt.Sprintf("[%3.0fs/%.0fs] started %d (%.1f/s)  paid %d  failed or refused tries %d%s",
				el.Seconds(), total.Seconds(), started, float64(started)/el.Seconds(), paid(), failed, topFailures(st))
			if tty {
				fmt.Fprintf(w, "\r\033[K%s", line)
			} else if now.Sub(lastPrint) >= 5*time.Second {
				fmt.Fprintln(w, line)
				lastPrint = now
			}
		}
	}
}

// topFailures names the three most frequent kinds of failed tries.
func topFailures(st *stats) string {
	st.mu.Lock()
	byKind := map[string]int{}
	for _, m := range []map[string]int{st.failures, st.refusals} {
		for k, n := range m {
			_, kind, _ := strings.Cut(k, ": ")
			byKind[kind] += n
		}
	}
	st.mu.Unlock()
	kinds := slices.Collect(maps.Keys(byKind))
	sort.Slice(kinds, func(i, j int) bool { return byKind[kinds[i]] > byKind[kinds[j]] })
	if len(kinds) == 0 {
		return ""
	}
	var parts []string
	for _, k := range kinds[:min(3, len(kinds))] {
		parts = append(parts, fmt.Sprintf("%s %d", k, byKind[k]))
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
