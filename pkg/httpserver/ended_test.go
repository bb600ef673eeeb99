package httpserver_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// TestEndedRequestsAreNotFailures: a handler whose database call fails
// because the request ended answers through Ended, not as a 500 logged as
// the handler's failure: past the deadline the client gets 503 with Retry-After; a
// client that hung up is recorded as 499; a plain failure is still the
// handler's own 500.
func TestEndedRequestsAreNotFailures(t *testing.T) {
	addr := testenv.FreeAddr(t)
	logs := &testenv.SyncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	reg := prometheus.NewRegistry()
	s := httpserver.New(httpserver.Options{Addr: addr, Config: deadlines, Logger: log, Registry: reg})
	entered := make(chan struct{}, 1)
	fail := func(c *gin.Context, err error) {
		if httpserver.Ended(c, log, err) {
			return
		}
		log.ErrorContext(c.Request.Context(), "request failed", "err", err)
		problem.Abort(c, http.StatusInternalServerError, "internal error")
	}
	s.Engine().GET("/wait", func(c *gin.Context) {
		entered <- struct{}{}
		<-c.Request.Context().Done() // a query cut off by the request's end
		fail(c, fmt.Errorf("read order: %w", c.Request.Context().Err()))
	})
	s.Engine().GET("/broken", func(c *gin.Context) {
		fail(c, errors.New("read order: table is gone"))
	})
	if _, err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	count := func(route, status string) float64 {
		families, err := reg.Gather()
		testenv.Must(t, err)
		n := 0.0
		for _, f := range families {
			if f.GetName() != "http_requests_total" {
				continue
			}
			for _, m := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["route"] == route && labels["status"] == status {
					n += m.GetCounter().GetValue()
				}
			}
		}
		return n
	}

	// The deadline (deadlines.RequestTimeout, 1 s) passes.
	resp, err := http.Get("http://" + addr + "/wait")
	testenv.Must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
		t.Fatalf("past the deadline: %d %v, want a 503 problem with Retry-After", resp.StatusCode, resp.Header)
	}

	// The client hangs up while the handler waits.
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/wait", nil)
	<-entered // the first request's
	go func() { <-entered; cancel() }()
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the hung-up request got an answer: %d", resp.StatusCode)
	}
	testenv.WaitFor(t, 5*time.Second, "the abandoned request recorded", func() bool {
		return count("/wait", "499") == 1
	})
	if strings.Contains(logs.String(), `"request failed"`) {
		t.Fatalf("an ended request was logged as the handler's failure:\n%s", logs)
	}

	// A failure of the handler's own is still a 500, logged as an error.
	resp, err = http.Get("http://" + addr + "/broken")
	testenv.Must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(logs.String(), `"request failed"`) {
		t.Fatalf("a plain failure: %d, want 500 logged as an error", resp.StatusCode)
	}
}
