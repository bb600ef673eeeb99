package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// refusingServer answers status (with retryAfter, if set) to its first
// refusals requests and 201 after; it records when each try came.
type refusingServer struct {
	*httptest.Server
	mu    sync.Mutex
	tries []time.Time
}

func newRefusingServer(t *testing.T, refusals int, status int, retryAfter string) *refusingServer {
	s := &refusingServer{}
	var n atomic.Int64
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.tries = append(s.tries, time.Now())
		s.mu.Unlock()
		if n.Add(1) <= int64(refusals) {
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			w.WriteHeader(status)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *refusingServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tries)
}

func testClient(retryFor time.Duration) (*client, *stats) {
	st := newStats()
	return newClient(Targets{}, 2*time.Second, retryFor, st), st
}

func customer(url string) request {
	return request{step: "POST /orders", method: "POST", urls: []string{url}, path: "/orders", retry: retryCustomer}
}

// TestClientHonoursRetryAfter: a well-made client waits at least what
// Retry-After says before the next try, and counts the 503s as refusals,
// not failures.
func TestClientHonoursRetryAfter(t *testing.T) {
	srv := newRefusingServer(t, 2, http.StatusServiceUnavailable, "1")
	c, st := testClient(30 * time.Second)
	a, err := c.do(context.Background(), customer(srv.URL))
	if err != nil || a.Status != http.StatusCreated {
		t.Fatalf("do = %d, %v; want 201 after two refusals", a.Status, err)
	}
	srv.mu.Lock()
	tries := srv.tries
	srv.mu.Unlock()
	if len(tries) != 3 {
		t.Fatalf("%d tries, want 3", len(tries))
	}
	for i := 1; i < len(tries); i++ {
		if gap := tries[i].Sub(tries[i-1]); gap < time.Second {
			t.Errorf("try %d came %s after the refusal that said Retry-After: 1", i+1, gap)
		}
	}
	if st.refusals["POST /orders: 503"] != 2 || len(st.failures) != 0 || st.retries["POST /orders"] != 2 {
		t.Fatalf("refusals %v, failures %v, retries %v", st.refusals, st.failures, st.retries)
	}
}

// TestClientRetryAtOnce: the bad client ignores Retry-After and retries at
// once until --retry-for runs out.
func TestClientRetryAtOnce(t *testing.T) {
	srv := newRefusingServer(t, 1<<30, http.StatusServiceUnavailable, "30")
	c, _ := testClient(300 * time.Millisecond)
	c.atOnce = true
	_, err := c.do(context.Background(), customer(srv.URL))
	if !errors.Is(err, errGaveUp) {
		t.Fatalf("do = %v, want it to give up", err)
	}
	if n := srv.count(); n < 5 {
		t.Fatalf("%d tries in 300 ms: the bad client waited for Retry-After: 30", n)
	}
}

// TestClientRetryBudget: with no tokens earned by first tries beyond the
// bucket's two, a failing server gets the first try, two retries, and the
// next request its first try only; the refused retries are counted.
func TestClientRetryBudget(t *testing.T) {
	srv := newRefusingServer(t, 1<<30, http.StatusInternalServerError, "")
	c, _ := testClient(time.Minute)
	c.budget = newRetryBudget(0, 0, 2, time.Now)
	for i := range 2 {
		if _, err := c.do(context.Background(), customer(srv.URL)); !errors.Is(err, errBudget) {
			t.Fatalf("request %d: %v, want the retry budget spent", i, err)
		}
	}
	if n := srv.count(); n != 4 {
		t.Fatalf("%d tries, want 4 (1 + 2 retries, then 1)", n)
	}
	if d := c.budget.deniedRetries(); d != 2 {
		t.Fatalf("%d retries denied, want 2", d)
	}
	// The operator's calls are not budgeted.
	op := customer(srv.URL)
	op.retry = retryOperator
	c.retryFor = 500 * time.Millisecond
	if _, err := c.do(context.Background(), op); !errors.Is(err, errGaveUp) || srv.count() < 6 {
		t.Fatalf("operator request: %v after %d tries; want it retried until --retry-for", err, srv.count())
	}
}

func TestRetryBudgetEarnsByFirstTries(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := newRetryBudget(0.2, 1, 10, func() time.Time { return now })
	for b.retry() {
	}
	for range 10 {
		b.firstTry()
	}
	if got := []bool{b.retry(), b.retry(), b.retry()}; !got[0] || !got[1] || got[2] {
		t.Fatalf("retries after ten first tries at 20%%: %v, want exactly two", got)
	}
	now = now.Add(3 * time.Second)
	for i := range 3 {
		if !b.retry() {
			t.Fatalf("retry %d of the floor's three seconds refused", i)
		}
	}
	if b.retry() {
		t.Fatal("more retries than the floor earned")
	}
	now = now.Add(time.Hour)
	n := 0
	for b.retry() {
		n++
	}
	if n != 10 {
		t.Fatalf("%d retries after an hour, want the burst of 10", n)
	}
}

func TestRetryAfterAndWait(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{"2": 2 * time.Second, "0": 0, "3600": time.Minute, "Thu, 01 Jan 2026 12:00:05 GMT": 5 * time.Second, "Thu, 01 Jan 2026 11:00:00 GMT": 0} {
		h := http.Header{"Retry-After": {v}}
		if got, ok := retryAfter(h, now); !ok || got != want {
			t.Errorf("Retry-After %q = %s (%v), want %s", v, got, ok, want)
		}
	}
	for _, v := range []string{"", "-1", "soon"} {
		if _, ok := retryAfter(http.Header{"Retry-After": {v}}, now); ok {
			t.Errorf("Retry-After %q accepted", v)
		}
	}
	c, _ := testClient(time.Minute)
	ra := answer{Header: http.Header{"Retry-After": {"2"}}}
	seen := map[time.Duration]bool{}
	for range 200 {
		w := c.wait(ra, 100*time.Millisecond, true)
		if w < 2*time.Second || w > 3*time.Second {
			t.Fatalf("wait after Retry-After: 2 = %s, want 2–3 s", w)
		}
		seen[w] = true
		if b := c.wait(answer{}, 400*time.Millisecond, true); b < 200*time.Millisecond || b > 400*time.Millisecond {
			t.Fatalf("backoff of 400ms waited %s, want 200–400 ms", b)
		}
	}
	if len(seen) < 100 {
		t.Fatalf("only %d different waits in 200: no jitter", len(seen))
	}
	c.atOnce = true
	if w := c.wait(ra, time.Second, true); w != 0 {
		t.Fatalf("the bad client waited %s", w)
	}
	if w := c.wait(ra, time.Second, false); w < 2*time.Second {
		t.Fatalf("the operator's call under --retry-at-once waited %s, want Retry-After", w)
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		a    answer
		err  error
		want tryClass
	}{
		{answer{Status: 201}, nil, tryAnswered},
		{answer{Status: 409}, nil, tryAnswered},
		{answer{Status: 503}, nil, tryRefused},
		{answer{Status: 429}, nil, tryRefused},
		{answer{Status: 500}, nil, tryRetried},
		{answer{Status: 409, Header: http.Header{"Retry-After": {"1"}}}, nil, tryRetried},
		{answer{}, errors.New("connection refused"), tryFailed},
	} {
		if got := classify(tc.a, tc.err); got != tc.want {
			t.Errorf("classify(%d, %v) = %d, want %d", tc.a.Status, tc.err, got, tc.want)
		}
	}
}
