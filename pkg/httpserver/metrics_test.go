package httpserver_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

var sharedAdmission = httpserver.AdmissionConfig{MaxInFlight: 4, PriorityReserve: 1, MaxQueued: 1,
	QueueTimeout: time.Second, RetryAfterMin: time.Second, RetryAfterMax: time.Second}

// TestServersOnOneRegistryShareTheirSeries: a second server built on the
// registry of a first one starts, both serve, their requests are counted in
// the same series, and the admission gauges add up both servers (the one
// holding a request is the second).
func TestServersOnOneRegistryShareTheirSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	release, entered := make(chan struct{}), make(chan struct{})
	var servers [2]*httpserver.Server
	for i := range servers {
		s, err := httpserver.New(httpserver.Options{Addr: "127.0.0.1:0", Config: deadlines,
			Admission: sharedAdmission, Logger: testenv.Logger(t), Registry: reg})
		testenv.Must(t, err)
		s.Engine().GET("/ping", func(c *gin.Context) { c.Status(http.StatusNoContent) })
		s.Engine().GET("/hold", func(c *gin.Context) { close(entered); <-release; c.Status(http.StatusNoContent) })
		servers[i] = s
	}
	for i, s := range servers {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ping", nil))
		if rec.Code != http.StatusNoContent {
			t.Fatalf("server %d: GET /ping = %d, want 204", i+1, rec.Code)
		}
	}
	if got := testenv.Metric(t, reg, "http_requests_total", "route", "/ping", "status", "204"); got != 2 {
		t.Fatalf("http_requests_total{route=/ping} = %v, want 2: one series counting both servers", got)
	}

	held := make(chan struct{})
	go func() {
		defer close(held)
		servers[1].Handler().ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/hold", nil))
	}()
	<-entered
	inFlight := testenv.Metric(t, reg, "http_admission_in_flight", "class", "new")
	limit := testenv.Metric(t, reg, "http_admission_limit", "class", "new")
	close(release)
	<-held
	if inFlight != 1 || limit != 2*3 {
		t.Fatalf("http_admission_in_flight{new} = %v, http_admission_limit{new} = %v; want 1 (the second server's request) and 6 (3 slots each)", inFlight, limit)
	}
}

// TestNewRefusesAClashingMetric: a metric of the server's name already
// registered otherwise (other labels, another type) is New's error, naming
// it, not a panic.
func TestNewRefusesAClashingMetric(t *testing.T) {
	for name, clash := range map[string]prometheus.Collector{
		"http_requests_total":  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "http_requests_total", Help: "Requests."}, []string{"code"}),
		"http_admission_limit": prometheus.NewGauge(prometheus.GaugeOpts{Name: "http_admission_limit", Help: "Limit."}),
	} {
		reg := prometheus.NewRegistry()
		testenv.Must(t, reg.Register(clash))
		_, err := httpserver.New(httpserver.Options{Addr: "127.0.0.1:0", Config: deadlines,
			Admission: sharedAdmission, Logger: testenv.Logger(t), Registry: reg})
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Fatalf("New on a registry holding another %s: %v; want an error naming it", name, err)
		}
	}
}
