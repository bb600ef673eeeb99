package platform_test

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// floodFigures is what one flood of a service measured.
type floodFigures struct {
	offered, created, refused, timedOut, other int
	peakHandlers                               int64   // handlers running at once, waiting for a connection included
	addedGoroutines                            int     // peak over the start, in the test process: the service and its clients
	addedHeapMiB                               float64 // peak live heap (just after a collection) over the start
	poolWaits                                  int64   // database/sql waits for a free connection
	poolWait                                   time.Duration
	refusalP50, refusalP99, createdP99         time.Duration
	reasons                                    map[string]float64 // http_admission_refused_total by reason
}

func (f floodFigures) String() string {
	return fmt.Sprintf("offered %d: %d created (p99 %s), %d refused (p50 %s, p99 %s), %d client timeouts, %d other; "+
		"refusals by reason %v; peak %d handlers, +%d goroutines, +%.1f MiB live heap; pool: %d waits, %s waited",
		f.offered, f.created, f.createdP99.Round(time.Millisecond), f.refused,
		f.refusalP50.Round(10*time.Microsecond), f.refusalP99.Round(10*time.Microsecond),
		f.timedOut, f.other, f.reasons, f.peakHandlers, f.addedGoroutines, f.addedHeapMiB, f.poolWaits, f.poolWait.Round(time.Millisecond))
}

// floodService starts the platform's service with adm and a pool of
// poolSize connections, serving POST /work: a statement that holds a
// connection for workTime, so the service completes at most
// poolSize/workTime requests a second. It offers rate requests a
// second for d, each a new request whatever became of the earlier ones (as
// clients arrive), each given up by its client after clientTimeout.
func floodService(t *testing.T, adm httpserver.AdmissionConfig, poolSize int, workTime time.Duration, rate int, d, clientTimeout time.Duration) floodFigures {
	t.Helper()
	cfg, opts, _ := setup(t)
	cfg.MySQL.MaxOpenConns, cfg.MySQL.MaxIdleConns = poolSize, poolSize
	cfg.Admission = adm
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt, err := platform.Start(ctx, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	var running, peak atomic.Int64
	hold := fmt.Sprintf("DO SLEEP(%g)", workTime.Seconds())
	rt.HTTP.Engine().POST("/work", func(c *gin.Context) {
		raise(&peak, running.Add(1))
		defer running.Add(-1)
		if err := rt.DB.WithContext(c.Request.Context()).Exec(hold).Error; err != nil {
			if !httpserver.Ended(c, rt.Log, err) {
				problem.Abort(c, http.StatusInternalServerError, err.Error())
			}
			return
		}
		c.Status(http.StatusCreated)
	})
	served := make(chan error, 1)
	go func() { served <- rt.Serve(ctx) }()
	base := "http://" + cfg.HTTPAddr
	waitReady(t, base+"/readyz", http.StatusOK)
	sqlDB, err := rt.DB.DB()
	if err != nil {
		t.Fatal(err)
	}
	before := sqlDB.Stats()

	var (
		f                   floodFigures
		mu                  sync.Mutex
		refusals, creations []time.Duration
		wg                  sync.WaitGroup
	)
	client := &http.Client{Timeout: clientTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: 4096}}
	defer client.CloseIdleConnections()
	record := func(took time.Duration, status int, err error) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil && strings.Contains(err.Error(), "Client.Timeout"):
			f.timedOut++
		case err != nil:
			f.other++
		case status == http.StatusCreated:
			f.created++
			creations = append(creations, took)
		case status == http.StatusServiceUnavailable:
			f.refused++
			refusals = append(refusals, took)
		default:
			f.other++
		}
	}

	// The sampler reads the goroutines and the live heap every 50 ms.
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	samplerStarted := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		heap := func() float64 {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			return float64(ms.HeapAlloc) / (1 << 20)
		}
		goroutines, live := runtime.NumGoroutine(), heap()
		close(samplerStarted)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			f.addedGoroutines = max(f.addedGoroutines, runtime.NumGoroutine()-goroutines)
			f.addedHeapMiB = max(f.addedHeapMiB, heap()-live)
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
		}
	}()

	// Open loop: every 10 ms what is due at rate since the start.
	<-samplerStarted
	began := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	for sent := 0; time.Since(began) < d; {
		<-tick.C
		due := int(time.Since(began).Seconds() * float64(rate))
		for ; sent < due; sent++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				resp, err := client.Post(base+"/work", "application/json", nil)
				status := 0
				if err == nil {
					status = resp.StatusCode
					resp.Body.Close()
				}
				record(time.Since(start), status, err)
			}()
		}
		f.offered = sent
	}
	tick.Stop()
	wg.Wait()
	close(stopSampling)
	<-sampled

	after := sqlDB.Stats()
	f.peakHandlers = peak.Load()
	f.poolWaits = after.WaitCount - before.WaitCount
	f.poolWait = after.WaitDuration - before.WaitDuration
	f.refusalP50, f.refusalP99 = quantile(refusals, 50), quantile(refusals, 99)
	f.createdP99 = quantile(creations, 99)
	f.reasons = testenv.MetricBy(t, rt.Registry, "http_admission_refused_total", "reason")
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	return f
}

// quantile returns the q-th percentile of d.
func quantile(d []time.Duration, q int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[len(d)*q/100]
}

func raise(peak *atomic.Int64, n int64) {
	for {
		p := peak.Load()
		if n <= p || peak.CompareAndSwap(p, n) {
			return
		}
	}
}

// TestAdmissionHoldsAServiceUnderAFlood offers a whole service ten times
// what it can complete, as clients that arrive whatever became of the
// earlier ones and give up after 2 s. Without a limit the requests pile up
// on goroutines and on database/sql's wait for a connection, and hold
// memory while they wait; with one, the service runs no more than its
// limit, no admitted request waits for a connection (the limit is within
// the pool), and the rest are refused at once, so the goroutines and the
// heap stay small. The figures are logged; the assertions are the bound
// and the comparison, not the clock.
func TestAdmissionHoldsAServiceUnderAFlood(t *testing.T) {
	// Few requests, each long: the flood is twelve times the service's
	// capacity while costing the test process little CPU, so that the
	// figures are the service's, not a busy machine's.
	const (
		pool     = 4
		workTime = time.Second // capacity pool/workTime = 4 requests/s
		rate     = 50
		d        = 4 * time.Second
		patience = 2 * time.Second
	)
	limited := httpserver.AdmissionConfig{MaxInFlight: pool, MaxQueued: 4, QueueTimeout: 100 * time.Millisecond,
		RetryAfterMin: time.Second, RetryAfterMax: 5 * time.Second}
	unlimited := limited
	unlimited.MaxInFlight, unlimited.PriorityReserve = 0, 0

	off := floodService(t, unlimited, pool, workTime, rate, d, patience)
	t.Logf("no limit: %s", off)
	on := floodService(t, limited, pool, workTime, rate, d, patience)
	t.Logf("limit %d:  %s", limited.MaxInFlight, on)

	if newWork := int64(limited.MaxInFlight - limited.PriorityReserve); on.peakHandlers > newWork {
		t.Errorf("%d handlers ran at once under the limit, want at most %d", on.peakHandlers, newWork)
	}
	if on.poolWaits != 0 {
		t.Errorf("admitted requests waited %d times (%s) for a connection, want never: the limit is within the pool", on.poolWaits, on.poolWait)
	}
	if on.created == 0 || on.refused == 0 {
		t.Errorf("under the limit: %s; want requests both created and refused", on)
	}
	if off.peakHandlers <= 2*int64(limited.MaxInFlight) || off.poolWaits == 0 {
		t.Fatalf("without a limit at most %d handlers ran at once and %d waited for a connection: the flood did not exceed the service, so it proves nothing", off.peakHandlers, off.poolWaits)
	}
	if on.addedGoroutines*2 > off.addedGoroutines {
		t.Errorf("the flood added %d goroutines with the limit, %d without: want under half", on.addedGoroutines, off.addedGoroutines)
	}
	if on.addedHeapMiB > off.addedHeapMiB {
		t.Errorf("the flood added %.1f MiB of live heap with the limit, %.1f MiB without: want less", on.addedHeapMiB, off.addedHeapMiB)
	}
}

// TestInternalAndDeclaredRoutesArePriority: the routes under /internal/
// and those a service declares in PriorityRoutes are admitted into the
// reserve that new work cannot take.
func TestInternalAndDeclaredRoutesArePriority(t *testing.T) {
	cfg, opts, _ := setup(t)
	cfg.Admission = httpserver.AdmissionConfig{MaxInFlight: 3, PriorityReserve: 2, QueueTimeout: time.Second,
		RetryAfterMin: time.Second, RetryAfterMax: 2 * time.Second}
	opts.PriorityRoutes = []string{"/callbacks/"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt, err := platform.Start(ctx, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var entered atomic.Int64
	hold := func(c *gin.Context) { entered.Add(1); <-release }
	for _, path := range []string{"/orders/hold", "/internal/hold", "/callbacks/hold"} {
		rt.HTTP.Engine().GET(path, hold)
	}
	served := make(chan error, 1)
	go func() { served <- rt.Serve(ctx) }()
	base := "http://" + cfg.HTTPAddr
	waitReady(t, base+"/readyz", http.StatusOK)

	var answered sync.WaitGroup
	for _, path := range []string{"/orders/hold", "/internal/hold", "/callbacks/hold"} {
		answered.Add(1)
		go func() {
			defer answered.Done()
			if resp, err := http.Get(base + path); err == nil {
				resp.Body.Close()
			}
		}()
	}
	testenv.WaitFor(t, 10*time.Second, "the three requests to run: one in the slot of new work, two in the reserve", func() bool {
		return entered.Load() == 3
	})
	if code, _ := get(t, base+"/orders/hold"); code != http.StatusServiceUnavailable {
		t.Fatalf("a second request of new work: %d, want 503 (its one slot is taken)", code)
	}
	if got := testenv.Metric(t, rt.Registry, "http_admission_in_flight", "class", "priority"); got != 2 {
		t.Fatalf("priority requests in flight: %v, want 2 (/internal/hold and /callbacks/hold)", got)
	}
	if code, _ := get(t, base+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz with every slot taken: %d, want 200", code)
	}
	close(release)
	answered.Wait()
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}
