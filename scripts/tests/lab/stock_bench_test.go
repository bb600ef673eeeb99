package lab

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/pkg/variant"
	orderlab "github.com/oncemall/oncemall/services/order/lab"
)

// BenchmarkHotProductStock measures a flash sale on one hot product in each
// stock mode: 100 concurrent POST /orders of one unit each, through the
// order service's real HTTP stack as cmd/order wires it (the
// Idempotency-Key guard in the order's transaction, a fresh key per
// request), on a product whose stock is set to 100 before every round, so
// that every order can be sold and the figures are the price of selling
// them: in the fixed mode the orders queue on the stock row's lock, each
// holding it until its transaction commits; in the broken mode they do
// not wait for one another's decisions, and sell units twice; in the
// optimistic mode the losers of each compare-and-set run their transaction
// again.
//
// A fourth case, spread, is the fixed mode with each client ordering a
// product of its own: the same requests without the hot row, which shows
// what queueing on one row costs.
//
// Each iteration is one round per case, in rotating order. Reported per
// case: orders/s (201s per second of the round), the 50th and 99th
// percentile latency of a request, and per round the 201s, the 409s, and
// the units sold beyond what left the stock (lost updates: broken only).
//
//	cd scripts && go test ./tests/lab -run '^$' -bench BenchmarkHotProductStock -benchtime 10x -count 1
func BenchmarkHotProductStock(b *testing.B) {
	const (
		clients = 100
		stock   = 100
	)
	ctx := context.Background()
	const spread variant.Mode = "spread"
	modes := []variant.Mode{variant.Fixed, variant.Broken, orderlab.Optimistic, spread}
	apis := make([]*orderlab.OrderAPI, len(modes))
	// products[i] are case i's products: one hot product, or one per
	// client when spread.
	products := make([][]uint64, len(modes))
	for i, m := range modes {
		stockMode, n := m, 1
		if m == spread {
			stockMode, n = variant.Fixed, clients
		}
		api, err := orderlab.StartOrderAPI(ctx, labEnv(b), "hot_"+string(m), orderlab.OrderAPIConfig{Guard: variant.Fixed, Stock: stockMode, Clients: clients})
		if err != nil {
			b.Fatal(err)
		}
		defer api.Close()
		apis[i] = api
		for j := range n {
			id, err := api.CreateProduct(ctx, fmt.Sprintf("hot-%s-%d", m, j), 4999, stock)
			if err != nil {
				b.Fatal(err)
			}
			products[i] = append(products[i], id)
		}
	}
	type totals struct {
		created, refused, lost int
		spent                  time.Duration
		latencies              []time.Duration
	}
	sum := make([]totals, len(modes))
	b.ResetTimer()
	for round := range b.N {
		for k := range modes {
			v := (round + k) % len(modes)
			b.StopTimer()
			for _, p := range products[v] {
				if err := apis[v].SetStock(ctx, p, stock); err != nil {
					b.Fatal(err)
				}
			}
			soldBefore, leftBefore := countSold(b, apis[v]), stockOf(b, apis[v])
			b.StartTimer()
			start := time.Now()
			statuses, latencies := hotRound(ctx, apis[v], products[v], round, clients)
			sum[v].spent += time.Since(start)
			b.StopTimer()
			sum[v].latencies = append(sum[v].latencies, latencies...)
			created := 0
			for _, s := range statuses {
				switch s {
				case http.StatusCreated:
					created++
				case http.StatusConflict:
					sum[v].refused++
				default:
					b.Fatalf("%s: a request answered %d", modes[v], s)
				}
			}
			sum[v].created += created
			sold := countSold(b, apis[v]) - soldBefore
			sum[v].lost += sold - (leftBefore - stockOf(b, apis[v]))
			b.StartTimer()
		}
	}
	b.StopTimer()
	rounds := float64(b.N)
	for v, m := range modes {
		s := sum[v]
		slices.Sort(s.latencies)
		b.ReportMetric(float64(s.created)/s.spent.Seconds(), string(m)+"-orders/s")
		b.ReportMetric(ms(percentile(s.latencies, 50)), string(m)+"-p50-ms")
		b.ReportMetric(ms(percentile(s.latencies, 99)), string(m)+"-p99-ms")
		b.ReportMetric(float64(s.created)/rounds, string(m)+"-201/round")
		b.ReportMetric(float64(s.refused)/rounds, string(m)+"-409/round")
		b.ReportMetric(float64(s.lost)/rounds, string(m)+"-oversold/round")
	}
}

// hotRound sends clients POST /orders of one unit at once, client i
// ordering products[i % len(products)], and returns their statuses and
// latencies.
func hotRound(ctx context.Context, api *orderlab.OrderAPI, products []uint64, round, clients int) ([]int, []time.Duration) {
	h := api.Handler
	statuses := make([]int, clients)
	latencies := make([]time.Duration, clients)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range clients {
		body := orderlab.OrderBody(products[i%len(products)], 1)
		authz, err := api.Authorization(uint64(i + 1))
		if err != nil {
			panic(err) // the rig's own issuer signs; a failure here is a broken rig
		}
		wg.Go(func() {
			req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/orders", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", authz)
			req.Header.Set(idempotency.HeaderKey, fmt.Sprintf("hot-%d-%d-%s", round, i, testenv.RandomSuffix(8)))
			rec := httptest.NewRecorder()
			<-start
			began := time.Now()
			h.ServeHTTP(rec, req)
			latencies[i] = time.Since(began)
			statuses[i] = rec.Code
		})
	}
	close(start)
	wg.Wait()
	return statuses, latencies
}

// countSold is the units reserved on api's database.
func countSold(b *testing.B, api *orderlab.OrderAPI) int {
	var n int
	if err := api.DB.Raw("SELECT COALESCE(SUM(quantity), 0) FROM stock_reservation").Scan(&n).Error; err != nil {
		b.Fatal(err)
	}
	return n
}

// stockOf is the units available on api's database.
func stockOf(b *testing.B, api *orderlab.OrderAPI) int {
	var n int
	if err := api.DB.Raw("SELECT COALESCE(SUM(available), 0) FROM product_stock").Scan(&n).Error; err != nil {
		b.Fatal(err)
	}
	return n
}

// percentile returns the p-th percentile of sorted latencies.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
