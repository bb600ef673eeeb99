package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// stats collects what the clients saw: each request's latency per step,
// failed tries by step and kind, retries, and the purchases' outcomes.
type stats struct {
	mu        sync.Mutex
	latency   map[string][]time.Duration // step → every answered try
	failures  map[string]int             // "step: kind" → tries
	retries   map[string]int             // step → tries after the first
	outcomes  map[string]int             // purchase outcome → purchases
	anomalies []string                   // what a client saw that must never happen (kept: the first 20)
	anomalyN  int
}

func newStats() *stats {
	return &stats{latency: map[string][]time.Duration{}, failures: map[string]int{}, retries: map[string]int{}, outcomes: map[string]int{}}
}

func (s *stats) observe(step string, d time.Duration) {
	s.mu.Lock()
	s.latency[step] = append(s.latency[step], d)
	s.mu.Unlock()
}

func (s *stats) fail(step, kind string) {
	s.mu.Lock()
	s.failures[step+": "+kind]++
	s.mu.Unlock()
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

// snapshot returns the counts the progress line shows.
func (s *stats) snapshot() (outcomes map[string]int, failed int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.failures {
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
			line := fmt.Sprintf("[%3.0fs/%.0fs] started %d (%.1f/s)  paid %d  failed tries %d%s",
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
	for k, n := range st.failures {
		_, kind, _ := strings.Cut(k, ": ")
		byKind[kind] += n
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
