package httpserver_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
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

// listening starts a real server with cfg (the deadlines are the
// net/http server's, which httptest recorders do not have) and returns its
// address and the handlers' exits.
func listening(t *testing.T, cfg httpserver.Config) (string, <-chan string) {
	t.Helper()
	addr := testenv.FreeAddr(t)
	s, err := httpserver.New(httpserver.Options{Addr: addr, Config: cfg, Logger: testenv.Logger(t), Registry: prometheus.NewRegistry()})
	testenv.Must(t, err)
	exits := make(chan string, 4)
	s.Engine().POST("/decode", func(c *gin.Context) {
		defer func() { exits <- "decode" }()
		var v map[string]any
		if httpserver.DecodeJSON(c, &v) {
			c.JSON(http.StatusOK, v)
		}
	})
	s.Engine().GET("/hold", func(c *gin.Context) {
		defer func() { exits <- "hold" }()
		select {
		case <-c.Request.Context().Done(): // what a database call does at the deadline
		case <-time.After(time.Minute):
			c.String(http.StatusOK, "held a minute")
		}
	})
	if _, err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return addr, exits
}

var deadlines = httpserver.Config{
	BodyLimitBytes: 1 << 20, ReadHeaderTimeout: 500 * time.Millisecond,
	ReadTimeout: time.Second, RequestTimeout: time.Second, WriteTimeout: 3 * time.Second,
}

// TestTrickledBodyDoesNotHoldTheHandler sends the headers at once and then
// one byte of the body every 200 ms, for far longer than HTTP_READ_TIMEOUT:
// the handler's read fails at the read deadline, the client gets 408 if it
// can still read, and the handler returns within the bound, not after the
// trickle.
func TestTrickledBodyDoesNotHoldTheHandler(t *testing.T) {
	addr, exits := listening(t, deadlines)
	conn, err := net.Dial("tcp", addr)
	testenv.Must(t, err)
	defer conn.Close()
	body := `{"note":"` + strings.Repeat("x", 100) + `"}`
	began := time.Now()
	fmt.Fprintf(conn, "POST /decode HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	go func() {
		for i := range len(body) {
			if _, err := conn.Write([]byte{body[i]}); err != nil {
				return
			}
			time.Sleep(200 * time.Millisecond) // 20 s for the whole body
		}
	}()
	select {
	case <-exits:
	case <-time.After(5 * time.Second):
		t.Fatalf("the handler was still reading a trickled body after %s; HTTP_READ_TIMEOUT is %s", time.Since(began), deadlines.ReadTimeout)
	}
	if took := time.Since(began); took < deadlines.ReadTimeout/2 {
		t.Fatalf("the handler returned after %s, before the read deadline: not the deadline that stopped it", took)
	}
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); err == nil {
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("answer %d %s, want 408", resp.StatusCode, b)
		}
	}
}

// TestRequestDeadlineFreesAHeldHandler: a handler waiting on its context
// (a slow query, a stuck downstream call) is released at
// HTTP_REQUEST_TIMEOUT, and the client gets 503 problem+json with
// Retry-After rather than waiting for the handler.
func TestRequestDeadlineFreesAHeldHandler(t *testing.T) {
	addr, exits := listening(t, deadlines)
	began := time.Now()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + addr + "/hold")
	testenv.Must(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	took := time.Since(began)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "deadline") {
		t.Fatalf("answer %d (Retry-After %q) %s, want 503 with Retry-After naming the deadline", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	if took < deadlines.RequestTimeout || took > deadlines.RequestTimeout+2*time.Second {
		t.Fatalf("answered after %s, want just after the %s deadline", took, deadlines.RequestTimeout)
	}
	select {
	case <-exits:
	case <-time.After(time.Second):
		t.Fatal("the handler had not returned when its answer came")
	}
}

func TestConfigValidateNamesTheVariable(t *testing.T) {
	for name, bad := range map[string]func(*httpserver.Config){
		"HTTP_READ_TIMEOUT":    func(c *httpserver.Config) { c.ReadTimeout = c.ReadHeaderTimeout / 2 },
		"HTTP_REQUEST_TIMEOUT": func(c *httpserver.Config) { c.RequestTimeout = 0 },
		"HTTP_WRITE_TIMEOUT":   func(c *httpserver.Config) { c.WriteTimeout = c.RequestTimeout },
	} {
		cfg := deadlines
		bad(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: Validate = %v, want an error naming it", name, err)
		}
	}
	if err := deadlines.Validate(); err != nil {
		t.Fatalf("good config: %v", err)
	}
}

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
	s, err := httpserver.New(httpserver.Options{Addr: addr, Config: deadlines, Logger: log, Registry: reg})
	testenv.Must(t, err)
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
		return testenv.Metric(t, reg, "http_requests_total", "route", route, "status", status)
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
