package lab

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/testenv"
	"github.com/oncemall/oncemall/services/order/internal/httpapi"
)

// BenchmarkCreateOrderAPI measures the throughput of the order service's
// real POST /orders (wired as cmd/order wires it: the platform's gin server
// with request ids, logging, metrics, recovery and the body limit; the form
// token check; the create-order use case writing the order and its
// order.created outbox row in one transaction) without the Idempotency-Key
// guard and with it (HandlerInTx, a fresh key per request). Requests are
// served in process, so the figures are the server's alone, not a client's
// or the loopback's; 32 are in flight, as on a busy server. The outbox relay
// does not run (see StartOrderAPI): the baseline is the request path only.
//
//	cd services/order && go test ./lab -run '^$' -bench BenchmarkCreateOrderAPI -benchtime 5s -count 3
func BenchmarkCreateOrderAPI(b *testing.B) {
	ctx := context.Background()
	for _, bc := range []struct{ name, guard string }{
		{"without", ""},
		{"with", idempotency.GuardFixed},
	} {
		b.Run(bc.name, func(b *testing.B) {
			api, err := StartOrderAPI(ctx, labEnv(b), "bench_"+bc.name, bc.guard)
			if err != nil {
				b.Fatal(err)
			}
			defer api.Close()
			var users atomic.Uint64
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				user := strconv.FormatUint(users.Add(1), 10)
				for pb.Next() {
					req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/orders", strings.NewReader(`{"amount":1999}`))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set(httpapi.UserIDHeader, user)
					req.Header.Set(idempotency.HeaderKey, "bench-"+testenv.RandomSuffix(24))
					w := httptest.NewRecorder()
					api.Handler.ServeHTTP(w, req)
					if w.Code != http.StatusCreated {
						b.Errorf("%d %s", w.Code, w.Body)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
	}
}
