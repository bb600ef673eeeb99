package lab

import (
	"context"
	"fmt"
	"github.com/oncemall/oncemall/pkg/testkit/proccpu"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/pkg/variant"
)

// BenchmarkCreateOrderAPI measures the throughput of the order service's
// real POST /orders (wired as cmd/order wires it: the platform's gin server
// with request ids, logging, metrics, recovery and the body limit; the form
// token check; the create-order use case writing the order and its
// stock reservation in one transaction, pricing its item from the
// catalog and taking its stock) without the Idempotency-Key guard and with
// it (HandlerInTx, a fresh key per request). Each worker orders its own
// product, so the orders do not queue on one stock row (that is
// BenchmarkHotProductStock's subject).
//
// Each iteration is one round: 2,000 requests to each server, 32 in flight,
// the two back to back and in alternating order, so both see the same
// machine when other work comes and goes; the metrics are the totals over
// all rounds. It also reports, per variant, the CPU time each request cost
// this process (the service and its load, in process), MariaDB and Redis:
// on a machine where the three share the cores, that is where the guard's
// cost goes. Requests are served in process, so the figures are the
// server's alone, not a client's or the loopback's. The outbox relay does
// not run (see StartOrderAPI): the baseline is the request path only.
//
//	cd services/order && go test ./lab -run '^$' -bench BenchmarkCreateOrderAPI -benchtime 5x -count 3
func BenchmarkCreateOrderAPI(b *testing.B) {
	const (
		perRound = 2000
		inFlight = 32
	)
	ctx := context.Background()
	variants := []struct {
		name  string
		guard variant.Mode
	}{{"without", NoGuard}, {"with", variant.Fixed}}
	apis := make([]*OrderAPI, len(variants))
	products := make([][]uint64, len(variants))
	for i, v := range variants {
		api, err := StartOrderAPI(ctx, labEnv(b), "bench_"+v.name, OrderAPIConfig{Guard: v.guard})
		if err != nil {
			b.Fatal(err)
		}
		defer api.Close()
		apis[i] = api
		for w := range inFlight {
			id, err := api.CreateProduct(ctx, fmt.Sprintf("bench-%d", w), 1999, 1_000_000_000)
			if err != nil {
				b.Fatal(err)
			}
			products[i] = append(products[i], id)
		}
	}
	spent := make([]time.Duration, len(variants))
	cpu := make([]proccpu.Times, len(variants))
	b.ResetTimer()
	for round := range b.N {
		for k := range variants {
			v := (round + k) % len(variants)
			start, cpu0 := time.Now(), proccpu.Read()
			if err := postOrders(ctx, apis[v], products[v], perRound); err != nil {
				b.Fatalf("%s: %v", variants[v].name, err)
			}
			spent[v] += time.Since(start)
			cpu[v] = cpu[v].Add(proccpu.Read().Sub(cpu0))
		}
	}
	rate := make([]float64, len(variants))
	for v, variant := range variants {
		n := float64(perRound * b.N)
		rate[v] = n / spent[v].Seconds()
		b.ReportMetric(rate[v], variant.name+"-req/s")
		perRequest := func(d time.Duration) float64 { return float64(d.Microseconds()) / n }
		b.ReportMetric(perRequest(cpu[v].Self), variant.name+"-go-cpu-us/req")
		b.ReportMetric(perRequest(cpu[v].MariaDB), variant.name+"-mariadb-cpu-us/req")
		b.ReportMetric(perRequest(cpu[v].Redis), variant.name+"-redis-cpu-us/req")
	}
	b.ReportMetric(rate[1]/rate[0], "with/without")
}

// postOrders serves n POST /orders, each with its own Idempotency-Key, from
// one goroutine per product, each a user of its own ordering one unit of
// its product.
func postOrders(ctx context.Context, api *OrderAPI, products []uint64, n int) error {
	h := api.Handler
	var (
		wg    sync.WaitGroup
		next  = make(chan struct{}, n)
		errMu sync.Mutex
		first error
	)
	for range n {
		next <- struct{}{}
	}
	close(next)
	for w, product := range products {
		authz, err := api.Authorization(uint64(w + 1))
		if err != nil {
			return err
		}
		body := OrderBody(product, 1)
		wg.Go(func() {
			for range next {
				req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/orders", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", authz)
				req.Header.Set(idempotency.HeaderKey, "bench-"+testenv.RandomSuffix(24))
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusCreated {
					errMu.Lock()
					if first == nil {
						first = fmt.Errorf("%d %s", rec.Code, rec.Body)
					}
					errMu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return first
}
