package main

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// ReadyCount is how a service's /readyz answered the polls of one phase
// (every replica polled once a second).
type ReadyCount struct {
	Polls int `json:"polls"`
	// NotReady counts the polls answered with anything but 200, or not
	// answered within 2 s.
	NotReady int `json:"not_ready"`
}

// watcher samples, once a second, each group's resident memory and each
// service's /readyz, and keeps the figures of every phase of the load: the
// largest RSS of any process of a group, and the polls that found a
// replica not ready.
type watcher struct {
	groups   func() map[string][]int
	services map[string][]string
	tl       timeline
	began    atomic.Pointer[time.Time] // the load's start; nil before it
	http     *http.Client

	mu    sync.Mutex
	rss   map[int]map[string]float64 // phase → group → MiB
	ready map[int]map[string]ReadyCount
}

func newWatcher(groups func() map[string][]int, services map[string][]string, tl timeline) *watcher {
	return &watcher{groups: groups, services: services, tl: tl, http: &http.Client{Timeout: 2 * time.Second},
		rss: map[int]map[string]float64{}, ready: map[int]map[string]ReadyCount{}}
}

// start tells the watcher the load began at t.
func (w *watcher) start(t time.Time) { w.began.Store(&t) }

// phase returns the phase in force now, -1 before the load.
func (w *watcher) phase() int {
	b := w.began.Load()
	if b == nil {
		return -1
	}
	return w.tl.at(time.Since(*b))
}

// run samples until ctx ends.
func (w *watcher) run(ctx context.Context) {
	var wg sync.WaitGroup
	for svc, urls := range w.services {
		for _, u := range urls {
			wg.Go(func() { w.pollReady(ctx, svc, u) })
		}
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		w.sampleRSS()
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-tick.C:
		}
	}
}

func (w *watcher) sampleRSS() {
	k := w.phase()
	if k < 0 {
		return
	}
	for g, pids := range w.groups() {
		for _, p := range pids {
			v := rssOf(p)
			w.mu.Lock()
			if w.rss[k] == nil {
				w.rss[k] = map[string]float64{}
			}
			w.rss[k][g] = max(w.rss[k][g], v)
			w.mu.Unlock()
		}
	}
}

func (w *watcher) pollReady(ctx context.Context, svc, base string) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		k := w.phase()
		if k < 0 {
			continue
		}
		ok := false
		if req, err := http.NewRequestWithContext(ctx, "GET", base+"/readyz", nil); err == nil {
			if resp, err := w.http.Do(req); err == nil {
				ok = resp.StatusCode == http.StatusOK
				resp.Body.Close()
			}
		}
		if ctx.Err() != nil {
			return
		}
		w.mu.Lock()
		if w.ready[k] == nil {
			w.ready[k] = map[string]ReadyCount{}
		}
		c := w.ready[k][svc]
		c.Polls++
		if !ok {
			c.NotReady++
		}
		w.ready[k][svc] = c
		w.mu.Unlock()
	}
}

// of returns phase k's figures.
func (w *watcher) of(k int) (rss map[string]float64, ready map[string]ReadyCount) {
	w.mu.Lock()
	defer w.mu.Unlock()
	rss, ready = map[string]float64{}, map[string]ReadyCount{}
	for g, v := range w.rss[k] {
		rss[g] = float64(int(v*10)) / 10
	}
	for s, c := range w.ready[k] {
		ready[s] = c
	}
	return rss, ready
}
