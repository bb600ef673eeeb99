package httpserver_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// admitted counts the handlers running at once, in all and by class, and
// the highest counts seen.
type admitted struct {
	running, peak        atomic.Int64
	byClass, peakByClass [2]atomic.Int64
	entered, finished    [2]atomic.Int64
	release              [2]chan struct{}
}

const (
	newWork  = 0
	priority = 1
)

func raise(peak *atomic.Int64, n int64) {
	for {
		p := peak.Load()
		if n <= p || peak.CompareAndSwap(p, n) {
			return
		}
	}
}

// handler blocks until a token arrives on (or the close of) the release
// channel of its class.
func (a *admitted) handler(cl int) gin.HandlerFunc {
	return func(c *gin.Context) {
		raise(&a.peak, a.running.Add(1))
		raise(&a.peakByClass[cl], a.byClass[cl].Add(1))
		a.entered[cl].Add(1)
		<-a.release[cl]
		a.byClass[cl].Add(-1)
		a.running.Add(-1)
		a.finished[cl].Add(1)
		c.String(http.StatusOK, "done")
	}
}

// admissionServer starts a real server with cfg and "/internal/" as its
// priority prefix, serving GET /work (new work) and GET /internal/work
// (priority), both blocking until released.
func admissionServer(t *testing.T, cfg httpserver.AdmissionConfig) (string, *admitted, *prometheus.Registry) {
	t.Helper()
	addr := testenv.FreeAddr(t)
	reg := prometheus.NewRegistry()
	s, err := httpserver.New(httpserver.Options{
		Addr: addr, Config: deadlines, Admission: cfg, Priority: []string{"/internal/"},
		Logger: testenv.Logger(t), Registry: reg,
		Checks: map[string]httpserver.Check{"nothing": func(context.Context) error { return nil }},
	})
	testenv.Must(t, err)
	a := &admitted{release: [2]chan struct{}{make(chan struct{}), make(chan struct{})}}
	s.Engine().GET("/work", a.handler(newWork))
	s.Engine().GET("/internal/work", a.handler(priority))
	if _, err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, ch := range a.release {
			select {
			case <-ch:
			default:
				close(ch)
			}
		}
		_ = s.Shutdown(context.Background())
	})
	return "http://" + addr, a, reg
}

// answer is what a client of the flood got.
type answer struct {
	status      int
	contentType string
	retryAfter  string
	code        string
	beforeFree  bool // came back while every admitted handler was still blocked
	err         error
}

// flood sends n concurrent GETs of url and returns their answers on the
// channel as they come; freed reports whether the test has released any
// handler yet.
func flood(client *http.Client, url string, n int, freed *atomic.Bool) <-chan answer {
	out := make(chan answer, n)
	for range n {
		go func() {
			resp, err := client.Get(url)
			if err != nil {
				out <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			a := answer{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"),
				retryAfter: resp.Header.Get("Retry-After"), beforeFree: !freed.Load()}
			var body struct{ Code string }
			b, _ := io.ReadAll(resp.Body)
			_ = json.Unmarshal(b, &body)
			a.code = body.Code
			out <- a
		}()
	}
	return out
}

// next returns the next answer of ch, failing t when none comes: the
// refusals must not wait for the admitted requests, which stay blocked.
func next(t *testing.T, ch <-chan answer) answer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("no answer within 10 s while the admitted requests are blocked")
		return answer{}
	}
}

// checkRefusal fails t unless a is the admission's refusal: 503
// problem+json, code overloaded, a Retry-After within [lo, hi] seconds,
// answered before any handler was released.
func checkRefusal(t *testing.T, a answer, lo, hi int) {
	t.Helper()
	if a.err != nil {
		t.Fatalf("refused request: %v", a.err)
	}
	s, err := strconv.Atoi(a.retryAfter)
	if a.status != http.StatusServiceUnavailable || !strings.HasPrefix(a.contentType, "application/problem+json") ||
		a.code != "overloaded" || err != nil || s < lo || s > hi {
		t.Fatalf("refusal %+v, want 503 problem+json, code overloaded, Retry-After in [%d, %d]", a, lo, hi)
	}
	if !a.beforeFree {
		t.Fatal("a refusal came back only after the admitted requests were released: it waited for them")
	}
}

// TestAdmissionBoundsTheRequestsInFlight floods a server far beyond its
// limit with requests whose handlers block: exactly the limit runs, the
// queue holds its cap, every other request is refused while the admitted
// ones are still blocked, the probes answer throughout, a slot freed goes
// to priority work first, and once released every admitted request
// completes.
func TestAdmissionBoundsTheRequestsInFlight(t *testing.T) {
	cfg := httpserver.AdmissionConfig{
		MaxInFlight: 8, PriorityReserve: 3, MaxQueued: 4,
		// Long enough that no waiter times out here: the test is about
		// the bound, not the clock.
		QueueTimeout:  time.Minute,
		RetryAfterMin: 2 * time.Second, RetryAfterMax: 6 * time.Second,
	}
	const newLimit = 5 // MaxInFlight − PriorityReserve
	base, a, reg := admissionServer(t, cfg)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 200}}
	var freed atomic.Bool

	// New work: 5 run, 4 wait, 51 are refused at once.
	const n = 60
	answers := flood(client, base+"/work", n, &freed)
	for range n - newLimit - cfg.MaxQueued {
		checkRefusal(t, next(t, answers), 2, 6)
	}
	testenv.WaitFor(t, 10*time.Second, "the admitted new work to start", func() bool {
		return a.entered[newWork].Load() == newLimit
	})
	if got := testenv.Metric(t, reg, "http_admission_queued", "class", "new"); got != float64(cfg.MaxQueued) {
		t.Fatalf("new work queued: %v, want the cap %d", got, cfg.MaxQueued)
	}

	// Priority work takes the reserve, not a slot more, and queues apart.
	const m = 20
	prioAnswers := flood(client, base+"/internal/work", m, &freed)
	for range m - cfg.PriorityReserve - cfg.MaxQueued {
		checkRefusal(t, next(t, prioAnswers), 2, 6)
	}
	testenv.WaitFor(t, 10*time.Second, "the admitted priority work to start", func() bool {
		return a.entered[priority].Load() == int64(cfg.PriorityReserve)
	})
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/metrics": 200} {
		resp, err := client.Get(base + path)
		testenv.Must(t, err)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s during the flood: %d, want %d", path, resp.StatusCode, want)
		}
	}
	for class, want := range map[string]float64{"new": newLimit, "priority": float64(cfg.PriorityReserve)} {
		if got := testenv.Metric(t, reg, "http_admission_in_flight", "class", class); got != want {
			t.Errorf("http_admission_in_flight{class=%s} = %v, want %v", class, got, want)
		}
	}
	for class, want := range map[string]float64{"new": n - newLimit - float64(cfg.MaxQueued), "priority": m - float64(cfg.PriorityReserve+cfg.MaxQueued)} {
		if got := testenv.Metric(t, reg, "http_admission_refused_total", "class", class, "reason", "queue_full"); got != want {
			t.Errorf("http_admission_refused_total{class=%s,reason=queue_full} = %v, want %v", class, got, want)
		}
	}

	// One new request finishes: its slot goes to a waiting priority
	// request, although new work was queued first.
	freed.Store(true)
	a.release[newWork] <- struct{}{}
	testenv.WaitFor(t, 10*time.Second, "a priority waiter to take the freed slot", func() bool {
		return a.entered[priority].Load() == int64(cfg.PriorityReserve)+1
	})
	if got := a.entered[newWork].Load(); got != newLimit {
		t.Fatalf("%d new requests entered after one finished, want %d: the freed slot went to new work", got, newLimit)
	}

	close(a.release[newWork])
	close(a.release[priority])
	for range newLimit + cfg.MaxQueued - 1 {
		if got := <-answers; got.status != http.StatusOK {
			t.Fatalf("an admitted new request: %+v, want 200", got)
		}
	}
	for range cfg.PriorityReserve + cfg.MaxQueued {
		if got := <-prioAnswers; got.status != http.StatusOK {
			t.Fatalf("an admitted priority request: %+v, want 200", got)
		}
	}
	<-answers // the one released first
	if p, pn := a.peak.Load(), a.peakByClass[newWork].Load(); p != int64(cfg.MaxInFlight) || pn != newLimit {
		t.Fatalf("at most %d ran at once (%d new), want exactly %d (%d new)", p, pn, cfg.MaxInFlight, newLimit)
	}
	if done := a.finished[newWork].Load() + a.finished[priority].Load(); done != newLimit+int64(cfg.MaxQueued)+int64(cfg.PriorityReserve+cfg.MaxQueued) {
		t.Fatalf("%d admitted requests finished, want every one admitted", done)
	}
}

// TestAdmissionRefusesAStandingQueueAtOnce: a request that finds the
// queue's oldest waiter past half of HTTP_QUEUE_TIMEOUT is refused at
// once, before that waiter's own time is up; the waiter is refused when
// its time is up.
func TestAdmissionRefusesAStandingQueueAtOnce(t *testing.T) {
	cfg := httpserver.AdmissionConfig{MaxInFlight: 1, MaxQueued: 4, QueueTimeout: 2 * time.Second,
		RetryAfterMin: time.Second, RetryAfterMax: 3 * time.Second}
	base, a, reg := admissionServer(t, cfg)
	client := &http.Client{}
	var freed atomic.Bool
	first := flood(client, base+"/work", 1, &freed)
	testenv.WaitFor(t, 10*time.Second, "the first request to run", func() bool { return a.entered[newWork].Load() == 1 })
	waiter := flood(client, base+"/work", 1, &freed)
	testenv.WaitFor(t, 10*time.Second, "the second request to queue", func() bool {
		return testenv.Metric(t, reg, "http_admission_queued", "class", "new") == 1
	})
	time.Sleep(cfg.QueueTimeout/2 + 100*time.Millisecond)
	checkRefusal(t, next(t, flood(client, base+"/work", 1, &freed)), 1, 3)
	select {
	case w := <-waiter:
		t.Fatalf("the waiter was answered (%+v) before the newcomer's refusal: the newcomer was not refused at once", w)
	default:
	}
	if got := testenv.Metric(t, reg, "http_admission_refused_total", "reason", "queue_standing"); got != 1 {
		t.Fatalf("queue_standing refusals: %v, want 1", got)
	}
	checkRefusal(t, next(t, waiter), 1, 3)
	if got := testenv.Metric(t, reg, "http_admission_refused_total", "reason", "queue_timeout"); got != 1 {
		t.Fatalf("queue_timeout refusals: %v, want 1", got)
	}
	freed.Store(true)
	close(a.release[newWork])
	if got := <-first; got.status != http.StatusOK {
		t.Fatalf("the admitted request: %+v", got)
	}
}

// TestRetryAfterSpreads: the Retry-After of the admission's refusals and
// of the deadline's answers is drawn from the configured range, and many
// answers do not all carry the same value.
func TestRetryAfterSpreads(t *testing.T) {
	cfg := httpserver.AdmissionConfig{MaxInFlight: 1, MaxQueued: 0, QueueTimeout: time.Second,
		RetryAfterMin: 3 * time.Second, RetryAfterMax: 7 * time.Second}
	addr := testenv.FreeAddr(t)
	short := deadlines
	short.RequestTimeout = 10 * time.Millisecond
	s, err := httpserver.New(httpserver.Options{Addr: addr, Config: short, Admission: cfg,
		Logger: testenv.Logger(t), Registry: prometheus.NewRegistry()})
	testenv.Must(t, err)
	release := make(chan struct{})
	entered := make(chan struct{})
	s.Engine().GET("/hold", func(c *gin.Context) {
		close(entered)
		<-release
	})
	// The admission runs before the deadline, so the held request keeps
	// its slot after its own deadline passes.
	s.Engine().GET("/late", func(c *gin.Context) { <-c.Request.Context().Done() })
	if _, err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		close(release)
		_ = s.Shutdown(context.Background())
	})
	base := "http://" + addr

	collect := func(path, want string) map[string]int {
		seen := map[string]int{}
		for range 100 {
			resp, err := http.Get(base + path)
			testenv.Must(t, err)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), want) {
				t.Fatalf("%s: %d %s, want 503 saying %q", path, resp.StatusCode, b, want)
			}
			ra := resp.Header.Get("Retry-After")
			if s, err := strconv.Atoi(ra); err != nil || s < 3 || s > 7 {
				t.Fatalf("%s: Retry-After %q, want whole seconds in [3, 7]", path, ra)
			}
			seen[ra]++
		}
		if len(seen) < 2 {
			t.Fatalf("%s: 100 answers all said Retry-After %v: the retries would come back together", path, seen)
		}
		return seen
	}
	t.Logf("deadline answers: %v", collect("/late", "deadline"))
	go func() {
		if resp, err := http.Get(base + "/hold"); err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	t.Logf("refusals: %v", collect("/late", "overloaded"))
}

func TestAdmissionConfigValidateNamesTheVariable(t *testing.T) {
	good := httpserver.AdmissionConfig{MaxInFlight: 24, PriorityReserve: 8, MaxQueued: 16, QueueTimeout: 100 * time.Millisecond,
		RetryAfterMin: time.Second, RetryAfterMax: 5 * time.Second}
	if err := good.Validate(); err != nil {
		t.Fatalf("good config: %v", err)
	}
	off := good
	off.MaxInFlight, off.PriorityReserve = 0, 0
	if err := off.Validate(); err != nil {
		t.Fatalf("no limit: %v", err)
	}
	for name, bad := range map[string]func(*httpserver.AdmissionConfig){
		"HTTP_MAX_IN_FLIGHT":    func(c *httpserver.AdmissionConfig) { c.MaxInFlight = -1 },
		"HTTP_PRIORITY_RESERVE": func(c *httpserver.AdmissionConfig) { c.PriorityReserve = c.MaxInFlight },
		"HTTP_MAX_QUEUED":       func(c *httpserver.AdmissionConfig) { c.MaxQueued = -1 },
		"HTTP_QUEUE_TIMEOUT":    func(c *httpserver.AdmissionConfig) { c.QueueTimeout = 0 },
		"HTTP_RETRY_AFTER_MIN":  func(c *httpserver.AdmissionConfig) { c.RetryAfterMin = 1500 * time.Millisecond },
		"HTTP_RETRY_AFTER_MAX":  func(c *httpserver.AdmissionConfig) { c.RetryAfterMax = c.RetryAfterMin - time.Second },
	} {
		cfg := good
		bad(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: Validate = %v, want an error naming it", name, err)
		}
	}
}

// BenchmarkAdmission serves one request through the whole middleware
// stack with no admission limit (off), under the limit with a slot free
// (admitted), and refused because the one slot is held (refused): what the
// admission costs an admitted request, and what a refusal costs. Run
//
//	cd pkg && go test -run '^$' -bench Admission -benchmem ./httpserver/
func BenchmarkAdmission(b *testing.B) {
	defaults := httpserver.AdmissionConfig{MaxInFlight: 24, PriorityReserve: 8, MaxQueued: 16, QueueTimeout: 50 * time.Millisecond,
		RetryAfterMin: time.Second, RetryAfterMax: 5 * time.Second}
	one := defaults
	one.MaxInFlight, one.PriorityReserve, one.MaxQueued = 1, 0, 0
	off := defaults
	off.MaxInFlight, off.PriorityReserve = 0, 0
	for _, tc := range []struct {
		name string
		cfg  httpserver.AdmissionConfig
		want int
	}{{"off", off, http.StatusAccepted}, {"admitted", defaults, http.StatusAccepted}, {"refused", one, http.StatusServiceUnavailable}} {
		b.Run(tc.name, func(b *testing.B) {
			s, err := httpserver.New(httpserver.Options{
				Addr: "127.0.0.1:0", Config: httpserver.Config{BodyLimitBytes: 1 << 10}, Admission: tc.cfg,
				Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Registry: prometheus.NewRegistry(),
			})
			testenv.Must(b, err)
			release := make(chan struct{})
			defer close(release)
			held := make(chan struct{})
			s.Engine().GET("/hold", func(c *gin.Context) { close(held); <-release })
			s.Engine().POST("/orders/:no/pay", func(c *gin.Context) { c.Status(http.StatusAccepted) })
			h := s.Engine() // as Listen serves it
			if tc.want == http.StatusServiceUnavailable {
				go h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/hold", nil))
				<-held
			}
			req := httptest.NewRequest(http.MethodPost, "/orders/O42/pay", nil)
			req.Header.Set(httpserver.RequestIDHeader, "bench-request-id")
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != tc.want {
					b.Fatalf("status %d, want %d", w.Code, tc.want)
				}
			}
		})
	}
}
