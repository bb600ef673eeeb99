package httpserver

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncemall/oncemall/pkg/config"
	pkgmetrics "github.com/oncemall/oncemall/pkg/metrics"
	"github.com/oncemall/oncemall/pkg/problem"
)

// AdmissionConfig bounds the requests a server works on at once and sets
// the Retry-After of its 503 answers. docs/scaling.md#overload says how the
// defaults were chosen. The zero value admits every request and answers
// Retry-After: 1.
type AdmissionConfig struct {
	// MaxInFlight is how many requests run at once, both classes together;
	// 0 admits every request.
	MaxInFlight int `env:"HTTP_MAX_IN_FLIGHT" default:"24" usage:"requests handled at once; one beyond it waits for a slot (HTTP_QUEUE_TIMEOUT) or is refused with 503; 0 admits every request"`
	// PriorityReserve is how many of those slots only priority routes may
	// take, so that a flood of new work never holds back the calls that
	// finish work already admitted.
	PriorityReserve int `env:"HTTP_PRIORITY_RESERVE" default:"8" usage:"slots of HTTP_MAX_IN_FLIGHT that only priority routes (/internal/…, the payment platform's callbacks) may take; new work runs in the rest"`
	// MaxQueued is how many requests of each class may wait for a slot.
	MaxQueued int `env:"HTTP_MAX_QUEUED" default:"16" usage:"requests of each class (new work, priority) that may wait for a slot; one beyond it is refused at once"`
	// QueueTimeout is the longest a request waits for a slot.
	QueueTimeout time.Duration `env:"HTTP_QUEUE_TIMEOUT" default:"50ms" usage:"longest a request waits for a slot; a request finding the queue's oldest waiter past half of it is refused at once"`
	// RetryAfterMin and RetryAfterMax are the range, in whole seconds, that
	// the Retry-After of every 503 of the server is drawn from.
	RetryAfterMin time.Duration `env:"HTTP_RETRY_AFTER_MIN" default:"1s" usage:"least Retry-After of a 503 (whole seconds); each answer draws one at random up to HTTP_RETRY_AFTER_MAX"`
	RetryAfterMax time.Duration `env:"HTTP_RETRY_AFTER_MAX" default:"5s" usage:"greatest Retry-After of a 503 (whole seconds)"`
}

// Validate reports unusable settings, each naming its variable.
func (c AdmissionConfig) Validate() error {
	bad := func(name string, v any, why string) error {
		return &config.Error{Var: name, Value: fmt.Sprint(v), Err: errors.New(why)}
	}
	var errs []error
	if c.MaxInFlight < 0 {
		errs = append(errs, bad("HTTP_MAX_IN_FLIGHT", c.MaxInFlight, "must be 0 (no limit) or positive"))
	}
	if c.PriorityReserve < 0 || (c.MaxInFlight > 0 && c.PriorityReserve >= c.MaxInFlight) {
		errs = append(errs, bad("HTTP_PRIORITY_RESERVE", c.PriorityReserve, "must be at least 0 and below HTTP_MAX_IN_FLIGHT, or new work could never run"))
	}
	if c.MaxQueued < 0 {
		errs = append(errs, bad("HTTP_MAX_QUEUED", c.MaxQueued, "must be 0 (refuse at once) or positive"))
	}
	if c.QueueTimeout <= 0 {
		errs = append(errs, bad("HTTP_QUEUE_TIMEOUT", c.QueueTimeout, "must be positive"))
	}
	if c.RetryAfterMin < time.Second || c.RetryAfterMin%time.Second != 0 {
		errs = append(errs, bad("HTTP_RETRY_AFTER_MIN", c.RetryAfterMin, "must be whole seconds, at least 1s"))
	}
	if c.RetryAfterMax < c.RetryAfterMin || c.RetryAfterMax%time.Second != 0 {
		errs = append(errs, bad("HTTP_RETRY_AFTER_MAX", c.RetryAfterMax, "must be whole seconds, at least HTTP_RETRY_AFTER_MIN"))
	}
	return errors.Join(errs...)
}

// Unavailable answers 503 problem+json with detail and a Retry-After drawn
// at random from the server's range (AdmissionConfig), so the clients one
// overload sends away come back spread out rather than together. Every 503
// of the package goes through it: the admission's refusals, Deadline and
// Ended. On a gin engine served without its Server (neither Listen nor
// Handler), the Retry-After is 1.
func Unavailable(c *gin.Context, detail string) {
	writeUnavailable(c, problem.New(http.StatusServiceUnavailable, detail))
}

func writeUnavailable(c *gin.Context, d problem.Details) {
	span, _ := c.Request.Context().Value(retryAfterKey{}).(retryRange)
	c.Header("Retry-After", strconv.Itoa(span.draw()))
	problem.Write(c, d)
}

// retryAfterKey is the context key of the server's retryRange. The range
// is in the base context of the server's connections (see Server.Handler
// for requests served without Listen), so carrying it costs a request
// nothing.
type retryAfterKey struct{}

// withRetryAfter returns ctx carrying r for Unavailable.
func withRetryAfter(ctx context.Context, r retryRange) context.Context {
	return context.WithValue(ctx, retryAfterKey{}, r)
}

// retryRange is a range of Retry-After values in whole seconds.
type retryRange struct{ min, max int }

// draw returns a value of r, uniformly; at least 1 however r was built.
func (r retryRange) draw() int {
	lo := max(r.min, 1)
	if r.max <= lo {
		return lo
	}
	return lo + rand.IntN(r.max-lo+1)
}

// Route classes of the admission control. Exempt routes (the probes, the
// metrics, the profiles) bypass it.
type class int

const (
	classNew      class = iota // new work from clients: refused first
	classPriority              // work that finishes what was admitted: calls of another service, platform callbacks
)

var classNames = [...]string{classNew: "new", classPriority: "priority"}

// Why a request was not admitted: the reason label of
// http_admission_refused_total.
type refusal int

const (
	refusedQueueFull     refusal = iota // no slot, and the class's queue is full
	refusedQueueStanding                // no slot, and the queue's oldest waiter has waited half the timeout
	refusedQueueTimeout                 // waited HTTP_QUEUE_TIMEOUT for a slot
	refusedClientGone                   // the client left while it waited (answered 499)
	refusals
)

var refusalNames = [...]string{
	refusedQueueFull:     "queue_full",
	refusedQueueStanding: "queue_standing",
	refusedQueueTimeout:  "queue_timeout",
	refusedClientGone:    "client_gone",
}

// overloadQuiet is how long a server refuses nothing before the overload
// it warned of is logged as ended.
const overloadQuiet = 10 * time.Second

// admission is the concurrency limit with a bounded wait in front of every
// route but the exempt ones. New work holds at most MaxInFlight −
// PriorityReserve slots; priority work may take any free slot, and a freed
// slot goes to a waiting priority request first. Each class has a FIFO
// queue of at most MaxQueued requests. A request that finds no slot is
// refused at once when its queue is full or standing (its oldest waiter has
// waited half of QueueTimeout: a newcomer would likely time out, and
// refusing it now is cheaper for both sides); otherwise it waits up to
// QueueTimeout. A refusal costs no database, no log line and no
// allocation beyond the answer: it is counted, and the first refusal after
// a quiet spell logs one warning that an overload started; the first
// request after overloadQuiet without a refusal logs that it ended.
type admission struct {
	limit    [2]int // slots each class may hold
	total    int
	maxQueue int
	timeout  time.Duration
	priority []string // route prefixes of classPriority
	log      *slog.Logger
	now      func() time.Time

	mu       sync.Mutex
	running  [2]int
	queues   [2]list.List // of *waiter
	overload overload
	// overloaded mirrors overload.active, so the requests of a quiet
	// server do not read the clock to learn that nothing ended.
	overloaded atomic.Bool

	refused [2][refusals]prometheus.Counter
	waited  [2]prometheus.Observer
}

// waiter is a request queued for a slot; granted and ready are set by
// the release that hands it one, under admission.mu.
type waiter struct {
	since   time.Time
	granted bool
	ready   chan struct{}
}

// overload is the episode of refusals the warnings are about.
type overload struct {
	active      bool
	since, last time.Time
	refused     int
}

// newAdmission returns the admission control of cfg, nil when cfg sets no
// limit. priority lists the route prefixes (as registered, "/internal/")
// admitted as priority work. Servers built on one registry share the
// admission metrics: the counters count the requests of all of them, the
// gauges report their sum.
func newAdmission(cfg AdmissionConfig, priority []string, log *slog.Logger, reg prometheus.Registerer) (*admission, error) {
	if cfg.MaxInFlight <= 0 {
		return nil, nil
	}
	a := &admission{
		limit:    [2]int{classNew: cfg.MaxInFlight - max(cfg.PriorityReserve, 0), classPriority: cfg.MaxInFlight},
		total:    cfg.MaxInFlight,
		maxQueue: cfg.MaxQueued,
		timeout:  cfg.QueueTimeout,
		priority: priority,
		log:      log,
		now:      time.Now,
	}
	s := pkgmetrics.NewSet(reg)
	refused := s.Counters("http_admission_refused_total",
		"Requests not admitted, by route class and reason (queue_full, queue_standing, queue_timeout: answered 503; client_gone: the client left while it waited).",
		"class", "reason")
	waited := s.Histograms("http_admission_queue_wait_seconds",
		"How long each admitted request waited for a slot (0 for one admitted at once), by route class.",
		[]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}, "class")
	if err := s.Err(); err != nil {
		return nil, err
	}
	for cl, name := range classNames {
		for r := range refusals {
			a.refused[cl][r] = refused.WithLabelValues(name, refusalNames[r])
		}
		a.waited[cl] = waited.WithLabelValues(name)
	}
	g, err := pkgmetrics.Register(reg, newAdmissionGauges())
	if err != nil {
		return nil, fmt.Errorf("admission gauges: %w", err)
	}
	g.add(a)
	return a, nil
}

func rangeOf(cfg AdmissionConfig) retryRange {
	return retryRange{min: int(cfg.RetryAfterMin / time.Second), max: int(cfg.RetryAfterMax / time.Second)}
}

// admissionGauges reports, at each scrape, the slots held, the requests
// queued and the limits of every admission registered on one registry,
// summed by route class: the first server's collector stays registered and
// the next servers add their admission to it.
type admissionGauges struct {
	inFlight, queued, limit *prometheus.Desc

	mu sync.Mutex
	of []*admission
}

func newAdmissionGauges() *admissionGauges {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, []string{"class"}, nil)
	}
	return &admissionGauges{
		inFlight: desc("http_admission_in_flight", "Requests admitted and running, by route class."),
		queued:   desc("http_admission_queued", "Requests waiting for a slot, by route class."),
		limit:    desc("http_admission_limit", "Slots a route class may hold (HTTP_MAX_IN_FLIGHT, less HTTP_PRIORITY_RESERVE for new work)."),
	}
}

func (g *admissionGauges) add(a *admission) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.of = append(g.of, a)
}

// Describe implements prometheus.Collector.
func (g *admissionGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.inFlight
	ch <- g.queued
	ch <- g.limit
}

// Collect implements prometheus.Collector.
func (g *admissionGauges) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	of := slices.Clone(g.of)
	g.mu.Unlock()
	var running, queued, limit [2]int
	for _, a := range of {
		a.mu.Lock()
		for cl := range classNames {
			running[cl] += a.running[cl]
			queued[cl] += a.queues[cl].Len()
			limit[cl] += a.limit[cl]
		}
		a.mu.Unlock()
	}
	for cl, name := range classNames {
		ch <- prometheus.MustNewConstMetric(g.inFlight, prometheus.GaugeValue, float64(running[cl]), name)
		ch <- prometheus.MustNewConstMetric(g.queued, prometheus.GaugeValue, float64(queued[cl]), name)
		ch <- prometheus.MustNewConstMetric(g.limit, prometheus.GaugeValue, float64(limit[cl]), name)
	}
}

// middleware passes each request through the admission control unless its
// route is exempt.
func (a *admission) middleware() gin.HandlerFunc {
	return func(c *gin.Context) {
		route := c.FullPath()
		if exempt(route) {
			a.noteQuiet()
			c.Next()
			return
		}
		cl := a.classOf(route)
		if r, ok := a.acquire(c.Request.Context(), cl); !ok {
			if r == refusedClientGone {
				c.AbortWithStatus(problem.StatusClientClosed)
				return
			}
			writeUnavailable(c, overloaded)
			return
		}
		defer a.release(cl)
		c.Next()
	}
}

// overloaded is the answer to a refused request; its code tells a client
// the service shed the request before doing any of it.
var overloaded = problem.New(http.StatusServiceUnavailable, "the service is at capacity; retry after the Retry-After delay").With("code", "overloaded")

// exempt reports whether route bypasses the admission control: the
// probes and the metrics, which must answer whatever the load (a refused
// liveness probe restarts the pod, a refused scrape blinds the operator),
// and the profiles that show where an overload goes.
func exempt(route string) bool {
	switch route {
	case "/healthz", "/readyz", "/metrics":
		return true
	}
	return strings.HasPrefix(route, PprofPath)
}

func (a *admission) classOf(route string) class {
	for _, p := range a.priority {
		if strings.HasPrefix(route, p) {
			return classPriority
		}
	}
	return classNew
}

// free reports whether cl may take a slot now. Callers hold a.mu.
func (a *admission) free(cl class) bool {
	return a.running[classNew]+a.running[classPriority] < a.total && a.running[cl] < a.limit[cl]
}

// acquire takes a slot for a request of class cl, waiting for one as the
// type's comment says, and reports why not when it does not.
func (a *admission) acquire(ctx context.Context, cl class) (refusal, bool) {
	q := &a.queues[cl]
	a.mu.Lock()
	if q.Len() == 0 && a.free(cl) {
		a.running[cl]++
		ended := a.endQuiet()
		a.mu.Unlock()
		a.logEnded(ended)
		a.waited[cl].Observe(0)
		return 0, true
	}
	now := a.now()
	switch {
	case q.Len() >= a.maxQueue:
		return a.refuseLocked(cl, refusedQueueFull, now), false
	case q.Len() > 0 && now.Sub(q.Front().Value.(*waiter).since) >= a.timeout/2:
		return a.refuseLocked(cl, refusedQueueStanding, now), false
	}
	w := &waiter{since: now, ready: make(chan struct{})}
	el := q.PushBack(w)
	a.mu.Unlock()

	timer := time.NewTimer(a.timeout)
	defer timer.Stop()
	reason := refusedQueueTimeout
	select {
	case <-w.ready:
		a.waited[cl].Observe(a.now().Sub(now).Seconds())
		return 0, true
	case <-timer.C:
	case <-ctx.Done():
		reason = refusedClientGone
	}
	a.mu.Lock()
	if w.granted { // handed a slot between the wake-up and the lock
		a.mu.Unlock()
		a.waited[cl].Observe(a.now().Sub(now).Seconds())
		return 0, true
	}
	q.Remove(el)
	return a.refuseLocked(cl, reason, a.now()), false
}

// refuseLocked counts a refusal, notes the overload it belongs to and
// unlocks a.mu, logging after the unlock when the refusal starts an
// overload. A client that left is counted but starts nothing.
func (a *admission) refuseLocked(cl class, r refusal, now time.Time) refusal {
	a.refused[cl][r].Inc()
	if r == refusedClientGone {
		a.mu.Unlock()
		return r
	}
	ended := a.endQuiet()
	o := &a.overload
	started := !o.active
	if started {
		*o = overload{active: true, since: now}
		a.overloaded.Store(true)
	}
	o.last = now
	o.refused++
	inFlight, queued := a.running, [2]int{a.queues[classNew].Len(), a.queues[classPriority].Len()}
	a.mu.Unlock()
	a.logEnded(ended)
	if started {
		a.log.Warn("overload: refusing requests with 503 until the load drops",
			"class", classNames[cl], "reason", refusalNames[r],
			"in_flight_new", inFlight[classNew], "in_flight_priority", inFlight[classPriority],
			"queued_new", queued[classNew], "queued_priority", queued[classPriority],
			"max_in_flight", a.total)
	}
	return r
}

// release gives back a slot of class cl and hands the free slots to the
// waiters, priority first.
func (a *admission) release(cl class) {
	a.mu.Lock()
	a.running[cl]--
	for _, c := range [...]class{classPriority, classNew} {
		q := &a.queues[c]
		for q.Len() > 0 && a.free(c) {
			w := q.Remove(q.Front()).(*waiter)
			w.granted = true
			a.running[c]++
			close(w.ready)
		}
	}
	a.mu.Unlock()
}

// noteQuiet ends an overload that has been quiet for overloadQuiet; the
// exempt requests call it, so that the probes and scrapes of an idle
// server close the episode too.
func (a *admission) noteQuiet() {
	if !a.overloaded.Load() {
		return
	}
	a.mu.Lock()
	ended := a.endQuiet()
	a.mu.Unlock()
	a.logEnded(ended)
}

// endQuiet ends the overload when nothing was refused for overloadQuiet,
// and returns the episode it ended (active false when none). Callers hold
// a.mu.
func (a *admission) endQuiet() overload {
	if !a.overloaded.Load() {
		return overload{}
	}
	o := a.overload
	if a.now().Sub(o.last) < overloadQuiet {
		return overload{}
	}
	a.overload = overload{}
	a.overloaded.Store(false)
	return o
}

func (a *admission) logEnded(o overload) {
	if o.active {
		a.log.Warn("overload ended", "refused", o.refused, "lasted_s", o.last.Sub(o.since).Seconds())
	}
}
