package main

import (
	"bufio"
	"context"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// JobCount is how often one scheduled job ran during the run, across the
// replicas: the intervals claimed in Redis (the platform's
// "<job>:interval:<n>" keys) and the runs the replicas counted
// (job_runs_total, scraped every two seconds; what a replica counted after
// its last scrape and before it was killed is missing).
//
// On the rig's own Redis every claim is seen as it happens (keyspace
// notifications, which the rig turns on): a claim made twice for one
// interval, which only a Redis that lost its keys allows, is counted in
// ClaimedTwice. On a Redis the loadgen does not own it changes no setting
// and scans for the keys every second instead, which can miss the claims
// of a job that runs every second (its keys live two seconds).
type JobCount struct {
	Service string `json:"service"`
	Job     string `json:"job"`
	// Claimed is the number of distinct intervals claimed in Redis.
	Claimed int `json:"intervals_claimed"`
	// ClaimedTwice is the intervals claimed more than once (notifications
	// only).
	ClaimedTwice int `json:"intervals_claimed_twice"`
	// Ran is the runs that executed the job: ok, failed, panicked, unlocked.
	Ran      int `json:"ran"`
	Unlocked int `json:"ran_unlocked"`
	Failed   int `json:"failed"`
	// Taken and Locked are the ticks skipped because another replica had
	// the interval or the lock.
	Taken  int `json:"skipped_taken"`
	Locked int `json:"skipped_locked"`
	// RunsPerInterval is Ran / Claimed: 1 when every claimed interval ran
	// once.
	RunsPerInterval float64 `json:"runs_per_interval,omitempty"`
}

// jobWatch samples the jobs' claims and run counters while the run goes.
type jobWatch struct {
	rdb      *redis.Client
	prefix   string              // the services' EVENT_SUBJECT_PREFIX, in their lock keys
	services map[string][]string // service → replica URLs
	// notify turns keyspace notifications on and counts every claim; only
	// on a Redis the loadgen owns.
	notify bool
	http   *http.Client

	mu      sync.Mutex
	claims  map[string]map[string]int     // service/job → interval → claims seen
	before  map[string]bool               // claims present at the first scan: intervals of before the run
	started bool                          // the first scan and scrape are done
	last    map[string]float64            // replica URL + series → last value
	totals  map[string]map[string]float64 // service/job → outcome → runs
}

func newJobWatch(t Targets, notify bool) *jobWatch {
	w := &jobWatch{
		services: map[string][]string{"order": t.Order, "coupon": t.Coupon, "payment": t.Payment},
		prefix:   t.SubjectPrefix,
		notify:   notify,
		http:     &http.Client{Timeout: 2 * time.Second},
		claims:   map[string]map[string]int{},
		before:   map[string]bool{},
		last:     map[string]float64{},
		totals:   map[string]map[string]float64{},
	}
	if t.RedisAddr != "" {
		w.rdb = redis.NewClient(&redis.Options{Addr: t.RedisAddr, Password: t.RedisPass, DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
	}
	return w
}

// run samples until ctx ends, then once more.
func (w *jobWatch) run(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var subscribed chan struct{}
	if w.rdb != nil && w.notify {
		subscribed = make(chan struct{})
		go func() { w.listen(ctx); close(subscribed) }()
	}
	for n := 0; ; n++ {
		if w.notify {
			// Every second: a restarted Redis has forgotten the setting.
			w.rdb.ConfigSet(context.Background(), "notify-keyspace-events", "E$")
		} else {
			w.scanClaims(context.Background())
		}
		if n%2 == 0 {
			w.scrape()
		}
		w.mu.Lock()
		w.started = true
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			if !w.notify {
				w.scanClaims(context.Background())
			}
			w.scrape()
			if subscribed != nil {
				<-subscribed
			}
			if w.rdb != nil {
				w.rdb.Close()
			}
			return
		case <-tick.C:
		}
	}
}

func (w *jobWatch) scanClaims(ctx context.Context) {
	if w.rdb == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	iter := w.rdb.Scan(ctx, 0, "oncemall:"+w.prefix+"*:lock:*:interval:*", 1000).Iterator()
	for iter.Next(ctx) {
		// oncemall:<prefix><service>:lock:<job>:interval:<n>
		key := strings.TrimPrefix(iter.Val(), "oncemall:"+w.prefix)
		w.mu.Lock()
		w.claim(key, true)
		w.mu.Unlock()
	}
}

// claim records the claim key (without "oncemall:<prefix>"); scanned keys
// count once however often they are seen, notified ones every time.
func (w *jobWatch) claim(key string, scanned bool) {
	svc, rest, ok := strings.Cut(key, ":lock:")
	job, slot, ok2 := strings.Cut(rest, ":interval:")
	if _, known := w.services[svc]; !ok || !ok2 || !known {
		return
	}
	k := svc + "/" + job
	if scanned && !w.started {
		w.before[k+"/"+slot] = true
	}
	if w.before[k+"/"+slot] {
		return
	}
	if w.claims[k] == nil {
		w.claims[k] = map[string]int{}
	}
	if scanned {
		w.claims[k][slot] = 1
	} else {
		w.claims[k][slot]++
	}
}

// listen counts the claims Redis announces (every SET of a claim key)
// until ctx ends, subscribing again after Redis restarts.
func (w *jobWatch) listen(ctx context.Context) {
	for ctx.Err() == nil {
		ps := w.rdb.PSubscribe(ctx, "__keyevent@*__:set")
		ch := ps.Channel()
	recv:
		for {
			select {
			case <-ctx.Done():
				break recv
			case m, ok := <-ch:
				if !ok {
					break recv
				}
				key, ok := strings.CutPrefix(m.Payload, "oncemall:"+w.prefix)
				if !ok {
					continue
				}
				w.mu.Lock()
				w.claim(key, false)
				w.mu.Unlock()
			}
		}
		ps.Close()
	}
}

// scrape reads job_runs_total from every replica and adds what grew since
// the last scrape.
func (w *jobWatch) scrape() {
	for svc, urls := range w.services {
		for _, u := range urls {
			resp, err := w.http.Get(u + "/metrics")
			if err != nil {
				continue
			}
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				line := sc.Text()
				if !strings.HasPrefix(line, "job_runs_total{") {
					continue
				}
				i := strings.LastIndexByte(line, ' ')
				v, err := strconv.ParseFloat(line[i+1:], 64)
				if err != nil {
					continue
				}
				series := line[:i]
				job, outcome := label(series, "job"), label(series, "outcome")
				w.mu.Lock()
				prev, seen := w.last[u+series]
				// The first scrape of a replica is the baseline; a counter
				// that went down belongs to a restarted process, and all of
				// its value is new.
				d := v - prev
				switch {
				case !seen && !w.started:
					d = 0
				case !seen:
					d = v
				case v < prev:
					d = v
				}
				w.last[u+series] = v
				k := svc + "/" + job
				if w.totals[k] == nil {
					w.totals[k] = map[string]float64{}
				}
				w.totals[k][outcome] += d
				w.mu.Unlock()
			}
			resp.Body.Close()
		}
	}
}

// label returns a Prometheus series' label value.
func label(series, name string) string {
	_, rest, ok := strings.Cut(series, name+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// counts returns one JobCount per job that claims intervals (the jobs that
// run on every replica, the relays' polls, claim none and are left out).
func (w *jobWatch) counts() []JobCount {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []JobCount
	for k, claims := range w.claims {
		svc, job, _ := strings.Cut(k, "/")
		t := w.totals[k]
		twice := 0
		for _, n := range claims {
			if n > 1 {
				twice++
			}
		}
		jc := JobCount{Service: svc, Job: job, Claimed: len(claims), ClaimedTwice: twice,
			Ran:      int(t["ok"] + t["failed"] + t["panicked"] + t["unlocked"]),
			Unlocked: int(t["unlocked"]), Failed: int(t["failed"]),
			Taken: int(t["taken"]), Locked: int(t["locked"])}
		if jc.Claimed > 0 {
			jc.RunsPerInterval = float64(jc.Ran) / float64(jc.Claimed)
		}
		out = append(out, jc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Service+out[i].Job < out[j].Service+out[j].Job })
	return out
}
