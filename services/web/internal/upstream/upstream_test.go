package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/web/internal/upstream"
)

// TestACopyStillRunningIsAskedAgainWithTheSameKey: while the order service
// answers 409 with Retry-After (the key held by a copy of the request), the
// storefront asks again with the same key, and ends with the copy's order;
// a 409 with a code (out of stock) is the answer.
func TestACopyStillRunningIsAskedAgainWithTheSameKey(t *testing.T) {
	var calls atomic.Int32
	keys := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keys <- r.Header.Get("Idempotency-Key")
		if r.Header.Get("Authorization") != "Bearer tok" || r.Header.Get("X-User-ID") != "" {
			t.Errorf("call without the caller's token, or with an X-User-ID: %v", r.Header)
		}
		w.Header().Set("Content-Type", "application/problem+json")
		if calls.Add(1) < 3 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"status":409,"detail":"a request with this Idempotency-Key is still being processed"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"order_no": "O1", "status": "WAIT_PAY"})
	}))
	defer srv.Close()
	c, err := upstream.New(upstream.URLs{Order: srv.URL}, srv.Client(), nil)
	testenv.Must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	o, err := c.PlaceOrder(ctx, upstream.Caller{Token: "tok", UserID: 42}, "web-k", []upstream.Item{{ProductID: 1, Quantity: 1}}, 0)
	if err != nil || o.OrderNo != "O1" || calls.Load() != 3 {
		t.Fatalf("order %+v, err %v after %d calls; want O1 after 3", o, err, calls.Load())
	}
	close(keys)
	for k := range keys {
		if k != "web-k" {
			t.Errorf("a retry sent key %q, want web-k", k)
		}
	}
}

// TestAnOutOfStockConflictIsTheAnswer: a 409 with a code is not retried.
func TestAnOutOfStockConflictIsTheAnswer(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write([]byte(`{"status":409,"detail":"too little stock","code":"out_of_stock"}`))
	}))
	defer srv.Close()
	reg := prometheus.NewRegistry()
	c, err := upstream.New(upstream.URLs{Order: srv.URL, Identity: "http://" + closedAddr(t)}, srv.Client(), reg)
	testenv.Must(t, err)
	_, err = c.PlaceOrder(context.Background(), upstream.Caller{Token: "tok", UserID: 42}, "web-k", []upstream.Item{{ProductID: 1, Quantity: 1}}, 0)
	var e *upstream.Error
	if !errors.As(err, &e) || e.Status != http.StatusConflict || e.Code != "out_of_stock" || calls.Load() != 1 {
		t.Fatalf("err %v after %d calls, want one 409 out_of_stock", err, calls.Load())
	}
	if _, err := c.SignIn(context.Background(), "alice", "pw"); upstream.StatusOf(err) != 0 || err == nil {
		t.Fatalf("sign-in at a closed port: %v, want a call that got no answer", err)
	}
	want := `
		# HELP web_upstream_calls_total Calls of the storefront to the services, by service and outcome (ok, refused: a 4xx answer, failed: no answer or a 5xx).
		# TYPE web_upstream_calls_total counter
		web_upstream_calls_total{outcome="failed",service="identity"} 1
		web_upstream_calls_total{outcome="refused",service="order"} 1
	`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "web_upstream_calls_total"); err != nil {
		t.Error(err)
	}
}

// closedAddr is an address nothing listens on.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
