package lab

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/order/internal/httpapi"
	"github.com/oncemall/oncemall/services/order/internal/stubs"
)

// BenchmarkPurchaseOrder measures the order service's full purchase order
// placement beside a plain one, both through the real POST /orders wired
// as cmd/order wires it (the platform's gin stack, the Idempotency-Key
// guard in the order's transaction with a fresh key per request, the form
// token check):
//
//   - plain: no coupon. One transaction prices the item from the catalog
//     under a shared lock, takes the stock by the conditional decrement,
//     and writes the order, its item, its reservation and order.created.
//   - purchase: with a coupon. The item is priced from the catalog before
//     the transaction, the coupon is locked at the coupon service over
//     HTTP for the order's total (a network call, so outside the
//     transaction), and the transaction re-reads the prices to check them
//     before it does all the plain one does, with the discount.
//
// The coupon service is the stand-in of internal/stubs, served over real
// loopback HTTP: its answer costs a round trip and a map update, not the
// coupon database's conditional update, so the purchase figure is the
// order service's side of the purchase. Each request is its own user with
// a coupon of its own; each of the 32 in-flight workers orders a product of
// its own, so the orders do not queue on one stock row
// (BenchmarkHotProductStock's subject).
//
// Each iteration is one round: 2,000 requests to each server, the two back
// to back in alternating order. Reported: req/s of each, purchase/plain,
// and per request the CPU time of this process (the service, the coupon
// stand-in and the load), MariaDB and Redis.
//
//	cd services/order && go test ./lab -run '^$' -bench '^BenchmarkPurchaseOrder$' -benchtime 3x -count 3
func BenchmarkPurchaseOrder(b *testing.B) {
	const (
		perRound = 2000
		inFlight = 32
		price    = 1999
		discount = 500
	)
	ctx := context.Background()
	kinds := []string{"plain", "purchase"}
	apis := make([]*OrderAPI, len(kinds))
	products := make([][]uint64, len(kinds))
	for i, k := range kinds {
		api, err := StartOrderAPI(ctx, labEnv(b), "buy_"+k, OrderAPIConfig{Guard: variant.Fixed, Clients: inFlight})
		if err != nil {
			b.Fatal(err)
		}
		defer api.Close()
		apis[i] = api
		for w := range inFlight {
			id, err := api.CreateProduct(ctx, fmt.Sprintf("buy-%d", w), price, 1_000_000_000)
			if err != nil {
				b.Fatal(err)
			}
			products[i] = append(products[i], id)
		}
	}
	spent := make([]time.Duration, len(kinds))
	cpu := make([]cpuTimes, len(kinds))
	nextUser := uint64(1)
	b.ResetTimer()
	for round := range b.N {
		for k := range kinds {
			v := (round + k) % len(kinds)
			b.StopTimer()
			// Users first..first+perRound-1 order in this round, each with
			// coupon id = user id when it is a purchase.
			first := nextUser
			nextUser += perRound
			withCoupon := kinds[v] == "purchase"
			if withCoupon {
				for u := first; u < nextUser; u++ {
					apis[v].Coupons.Add(stubs.Coupon{ID: u, UserID: u, Discount: discount, MinOrderAmount: 1000})
				}
			}
			b.StartTimer()
			start, cpu0 := time.Now(), readCPU()
			if err := purchaseRound(ctx, apis[v].Handler, products[v], first, perRound, withCoupon); err != nil {
				b.Fatalf("%s: %v", kinds[v], err)
			}
			spent[v] += time.Since(start)
			cpu[v] = cpu[v].add(readCPU().sub(cpu0))
		}
	}
	b.StopTimer()
	// Every purchase took its coupon's lock once, and no order lost it.
	locks, releases := apis[1].Coupons.Calls()
	if want := perRound * b.N; locks != want || len(releases) != 0 {
		b.Fatalf("purchase: %d coupon locks and %d releases for %d orders, want %d and 0", locks, len(releases), want, want)
	}
	rate := make([]float64, len(kinds))
	for v, k := range kinds {
		n := float64(perRound * b.N)
		rate[v] = n / spent[v].Seconds()
		b.ReportMetric(rate[v], k+"-req/s")
		perRequest := func(d time.Duration) float64 { return float64(d.Microseconds()) / n }
		b.ReportMetric(perRequest(cpu[v].self), k+"-go-cpu-us/req")
		b.ReportMetric(perRequest(cpu[v].mariadb), k+"-mariadb-cpu-us/req")
		b.ReportMetric(perRequest(cpu[v].redis), k+"-redis-cpu-us/req")
	}
	b.ReportMetric(rate[1]/rate[0], "purchase/plain")
}

// purchaseRound serves n POST /orders of one unit, request i by user
// first+i (with that user's coupon when withCoupon), from one goroutine per
// product, each ordering its own product; every answer must be 201.
func purchaseRound(ctx context.Context, h http.Handler, products []uint64, first uint64, n int, withCoupon bool) error {
	var (
		wg    sync.WaitGroup
		next  = make(chan uint64, n)
		errMu sync.Mutex
		err   error
	)
	for i := range uint64(n) {
		next <- first + i
	}
	close(next)
	for _, product := range products {
		wg.Go(func() {
			for user := range next {
				body := OrderBody(product, 1)
				if withCoupon {
					body = fmt.Sprintf(`{"items":[{"product_id":%d,"quantity":1}],"coupon_id":%d}`, product, user)
				}
				req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/orders", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set(httpapi.UserIDHeader, strconv.FormatUint(user, 10))
				req.Header.Set(idempotency.HeaderKey, "buy-"+testenv.RandomSuffix(24))
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusCreated {
					errMu.Lock()
					if err == nil {
						err = fmt.Errorf("user %d: %d %s", user, rec.Code, rec.Body)
					}
					errMu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return err
}
