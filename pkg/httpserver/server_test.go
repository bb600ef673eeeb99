package httpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

func newServer(t *testing.T, checks map[string]httpserver.Check) *httpserver.Server {
	t.Helper()
	s, err := httpserver.New(httpserver.Options{
		Addr:     "127.0.0.1:0",
		Config:   httpserver.Config{BodyLimitBytes: 16},
		Logger:   testenv.Logger(t),
		Registry: prometheus.NewRegistry(),
		Checks:   checks,
	})
	testenv.Must(t, err)
	e := s.Engine()
	e.GET("/panic", func(*gin.Context) { panic("boom") })
	e.POST("/echo", func(c *gin.Context) {
		b, err := io.ReadAll(c.Request.Body)
		if err != nil {
			if httpserver.IsBodyTooLarge(err) {
				problem.Abort(c, http.StatusRequestEntityTooLarge, "too large")
				return
			}
			problem.Abort(c, http.StatusBadRequest, err.Error())
			return
		}
		c.Data(http.StatusOK, "text/plain", b)
	})
	admin := e.Group("/admin", httpserver.AdminAuth("s3cret-token"))
	admin.GET("/ping", func(c *gin.Context) { c.String(http.StatusOK, "pong") })
	return s
}

func do(t *testing.T, h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func decodeProblem(t *testing.T, w *httptest.ResponseRecorder, status int) map[string]any {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status %d, want %d; body %s", w.Code, status, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); ct != problem.ContentType {
		t.Fatalf("Content-Type %q, want %q", ct, problem.ContentType)
	}
	var p map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("problem body %s: %v", w.Body, err)
	}
	if p["status"] != float64(status) || p["title"] != http.StatusText(status) {
		t.Fatalf("problem %v does not carry status %d and its title", p, status)
	}
	return p
}

func TestProblemResponses(t *testing.T) {
	h := newServer(t, nil).Handler()
	decodeProblem(t, do(t, h, httptest.NewRequest(http.MethodGet, "/nope", nil)), http.StatusNotFound)
	decodeProblem(t, do(t, h, httptest.NewRequest(http.MethodDelete, "/healthz", nil)), http.StatusMethodNotAllowed)
	p := decodeProblem(t, do(t, h, httptest.NewRequest(http.MethodGet, "/panic", nil)), http.StatusInternalServerError)
	if strings.Contains(p["detail"].(string), "boom") {
		t.Fatalf("the panic value leaked to the client: %v", p)
	}
}

func TestBodyLimit(t *testing.T) {
	h := newServer(t, nil).Handler()
	if w := do(t, h, httptest.NewRequest(http.MethodPost, "/echo", strings.NewReader("small"))); w.Code != http.StatusOK || w.Body.String() != "small" {
		t.Fatalf("small body: %d %s", w.Code, w.Body)
	}
	// Declared too large: refused before the handler runs.
	decodeProblem(t, do(t, h, httptest.NewRequest(http.MethodPost, "/echo", strings.NewReader(strings.Repeat("x", 17)))), http.StatusRequestEntityTooLarge)
	// Undeclared length (chunked): the reader stops at the limit.
	req := httptest.NewRequest(http.MethodPost, "/echo", io.MultiReader(strings.NewReader(strings.Repeat("y", 40))))
	req.ContentLength = -1
	decodeProblem(t, do(t, h, req), http.StatusRequestEntityTooLarge)
}

func TestRequestIDEcho(t *testing.T) {
	h := newServer(t, nil).Handler()
	req := httptest.NewRequest(http.MethodGet, "/healthz", nil)
	req.Header.Set(httpserver.RequestIDHeader, "abc-123")
	if got := do(t, h, req).Header().Get(httpserver.RequestIDHeader); got != "abc-123" {
		t.Fatalf("echoed request id %q", got)
	}
	// An unusable id (spaces, control characters) is replaced by a fresh one.
	req = httptest.NewRequest(http.MethodGet, "/healthz", nil)
	req.Header.Set(httpserver.RequestIDHeader, "bad id\x01")
	got := do(t, h, req).Header().Get(httpserver.RequestIDHeader)
	if got == "" || got == "bad id\x01" {
		t.Fatalf("request id %q, want a generated one", got)
	}
	other := do(t, h, httptest.NewRequest(http.MethodGet, "/healthz", nil)).Header().Get(httpserver.RequestIDHeader)
	if other == "" || other == got {
		t.Fatalf("generated ids %q and %q are not distinct", got, other)
	}
}

func TestMetricsCountRequests(t *testing.T) {
	h := newServer(t, nil).Handler()
	do(t, h, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	do(t, h, httptest.NewRequest(http.MethodGet, "/nope", nil))
	do(t, h, httptest.NewRequest(http.MethodGet, "/panic", nil))
	body := do(t, h, httptest.NewRequest(http.MethodGet, "/metrics", nil)).Body.String()
	for _, want := range []string{
		`http_requests_total{method="GET",route="/healthz",status="200"} 1`,
		`http_requests_total{method="GET",route="unmatched",status="404"} 1`,
		`http_requests_total{method="GET",route="/panic",status="500"} 1`,
		`http_request_duration_seconds_count{method="GET",route="/healthz"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestAdminAuth(t *testing.T) {
	h := newServer(t, nil).Handler()
	for _, tc := range []struct {
		header string
		status int
	}{
		{"", http.StatusUnauthorized},
		{"Bearer", http.StatusUnauthorized},
		{"Bearer wrong", http.StatusUnauthorized},
		{"Bearer s3cret-toke", http.StatusUnauthorized},
		{"Bearer s3cret-token-and-more", http.StatusUnauthorized},
		{"Basic s3cret-token", http.StatusUnauthorized},
		{"Bearer s3cret-token", http.StatusOK},
	} {
		req := httptest.NewRequest(http.MethodGet, "/admin/ping", nil)
		if tc.header != "" {
			req.Header.Set("Authorization", tc.header)
		}
		w := do(t, h, req)
		if w.Code != tc.status {
			t.Errorf("Authorization %q: %d, want %d", tc.header, w.Code, tc.status)
		}
		if tc.status == http.StatusUnauthorized {
			decodeProblem(t, w, http.StatusUnauthorized)
		}
	}
}

func TestAdminAuthEmptyTokenRefusesEverything(t *testing.T) {
	e := gin.New()
	e.GET("/admin", httpserver.AdminAuth(""), func(c *gin.Context) { c.Status(http.StatusOK) })
	req := httptest.NewRequest(http.MethodGet, "/admin", nil)
	req.Header.Set("Authorization", "Bearer ")
	if w := do(t, e, req); w.Code != http.StatusUnauthorized {
		t.Fatalf("empty configured token let a request through: %d", w.Code)
	}
}

func TestReadyz(t *testing.T) {
	ok := func(context.Context) error { return nil }
	h := newServer(t, map[string]httpserver.Check{"mysql": ok, "nats": ok, "redis": ok}).Handler()
	if w := do(t, h, httptest.NewRequest(http.MethodGet, "/readyz", nil)); w.Code != http.StatusOK {
		t.Fatalf("all checks pass: %d %s", w.Code, w.Body)
	}

	h = newServer(t, map[string]httpserver.Check{
		"mysql": ok,
		"nats":  ok,
		"redis": func(context.Context) error { return errors.New("dial tcp: connection refused") },
	}).Handler()
	p := decodeProblem(t, do(t, h, httptest.NewRequest(http.MethodGet, "/readyz", nil)), http.StatusServiceUnavailable)
	failed, _ := p["failed"].(map[string]any)
	if len(failed) != 1 || failed["redis"] == nil || !strings.Contains(p["detail"].(string), "redis") {
		t.Fatalf("readyz problem %v does not name redis alone", p)
	}
}

func TestListenAndShutdown(t *testing.T) {
	s := newServer(t, nil)
	done, err := s.Listen()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("serve after clean shutdown: %v", err)
	}
	// A taken port is reported by Listen, not later.
	blocker := httptest.NewServer(http.NotFoundHandler())
	defer blocker.Close()
	s2, err := httpserver.New(httpserver.Options{Addr: strings.TrimPrefix(blocker.URL, "http://"), Logger: testenv.Logger(t), Registry: prometheus.NewRegistry()})
	testenv.Must(t, err)
	if _, err := s2.Listen(); err == nil {
		t.Fatal("Listen on a taken port succeeded")
	}
}

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
