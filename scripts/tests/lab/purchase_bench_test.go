package lab

import (
	"context"
	"errors"
	"fmt"
	"github.com/oncemall/oncemall/pkg/testkit/proccpu"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/pkg/variant"
	couponlab "github.com/oncemall/oncemall/services/coupon/lab"
	orderlab "github.com/oncemall/oncemall/services/order/lab"
)

// BenchmarkPurchaseOrder measures the order service's full purchase order
// placement beside a plain one, both through the real POST /orders wired
// as cmd/order wires it (the platform's gin stack, the Idempotency-Key
// guard in the order's transaction with a fresh key per request, the form
// token check), both ordering one unit of each of two products:
//
//   - plain: no coupon. One transaction prices the items from the catalog
//     under a shared lock, takes the stock by the conditional decrement,
//     and writes the order, its items and its reservations.
//   - purchase: with a coupon. The items are priced from the catalog before
//     the transaction, the coupon is locked at the coupon service over
//     HTTP for the order's total (a network call, so outside the
//     transaction), and the transaction re-reads the prices to check them
//     before it does all the plain one does, with the discount.
//
// The coupon service is the real one (services/coupon/lab's Serve: its
// httpapi over its app and store, as cmd/coupon wires them, on a database
// of its own), served over loopback HTTP with the internal token: each
// purchase costs the order service one more HTTP round trip and the coupon
// service one more transaction (the conditional update UNUSED -> LOCKED on
// the coupon's row). Each request is its own user; every purchase user is
// issued a coupon of their own on the coupon service before the timed
// rounds. Each of the 32 in-flight workers orders two products of its own,
// so the orders do not queue on one stock row (BenchmarkHotProductStock's
// subject).
//
// Each iteration is one round: 2,000 requests to each order server, the two
// back to back in alternating order. Reported: req/s of each,
// purchase/plain, and per request the CPU time of this process (the order
// services, the coupon service and the load: all in process), MariaDB and
// Redis. Afterwards every purchase must have locked its coupon: as many
// coupons LOCKED on the coupon service as purchases, none left UNUSED, and
// as many discounted orders.
//
//	cd scripts && go test ./tests/lab -run '^$' -bench '^BenchmarkPurchaseOrder$' -benchtime 3x -count 3
func BenchmarkPurchaseOrder(b *testing.B) {
	const (
		perRound = 2000
		inFlight = 32
		price    = 1999
		discount = 500
	)
	ctx := context.Background()
	coupons, err := couponlab.Serve(ctx, labEnv(b), "buy_coupon", orderlab.InternalToken, orderlab.AdminToken)
	if err != nil {
		b.Fatal(err)
	}
	defer coupons.Close()
	kinds := []string{"plain", "purchase"}
	apis := make([]*orderlab.OrderAPI, len(kinds))
	products := make([][][2]uint64, len(kinds))
	for i, k := range kinds {
		cfg := orderlab.OrderAPIConfig{Guard: variant.Fixed, Clients: inFlight}
		if k == "purchase" {
			cfg.CouponURL = coupons.URL
		}
		api, err := orderlab.StartOrderAPI(ctx, labEnv(b), "buy_"+k, cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer api.Close()
		apis[i] = api
		for w := range inFlight {
			var pair [2]uint64
			for j := range pair {
				if pair[j], err = api.CreateProduct(ctx, fmt.Sprintf("buy-%d-%d", w, j), price, 1_000_000_000); err != nil {
					b.Fatal(err)
				}
			}
			products[i] = append(products[i], pair)
		}
	}
	// Users 1..b.N*perRound place the orders on each server, perRound a
	// round; the purchase side's user u pays with couponOf[u-1].
	users := perRound * b.N
	couponOf, err := issueCoupons(ctx, coupons, users, inFlight, discount)
	if err != nil {
		b.Fatal(err)
	}
	spent := make([]time.Duration, len(kinds))
	cpu := make([]proccpu.Times, len(kinds))
	b.ResetTimer()
	for round := range b.N {
		first := uint64(round*perRound + 1)
		for k := range kinds {
			v := (round + k) % len(kinds)
			var couponFor func(user uint64) uint64
			if kinds[v] == "purchase" {
				couponFor = func(user uint64) uint64 { return couponOf[user-1] }
			}
			start, cpu0 := time.Now(), proccpu.Read()
			if err := purchaseRound(ctx, apis[v], products[v], first, perRound, couponFor); err != nil {
				b.Fatalf("%s: %v", kinds[v], err)
			}
			spent[v] += time.Since(start)
			cpu[v] = cpu[v].Add(proccpu.Read().Sub(cpu0))
		}
	}
	b.StopTimer()
	if err := checkCouponsLocked(ctx, coupons, apis[1], users, discount); err != nil {
		b.Fatal(err)
	}
	rate := make([]float64, len(kinds))
	for v, k := range kinds {
		n := float64(users)
		rate[v] = n / spent[v].Seconds()
		b.ReportMetric(rate[v], k+"-req/s")
		perRequest := func(d time.Duration) float64 { return float64(d.Microseconds()) / n }
		b.ReportMetric(perRequest(cpu[v].Self), k+"-go-cpu-us/req")
		b.ReportMetric(perRequest(cpu[v].MariaDB), k+"-mariadb-cpu-us/req")
		b.ReportMetric(perRequest(cpu[v].Redis), k+"-redis-cpu-us/req")
	}
	b.ReportMetric(rate[1]/rate[0], "purchase/plain")
}

// issueCoupons creates a template of discount cents off orders from 10.00
// on the coupon service and issues users 1..n one coupon each, from workers
// goroutines; couponOf[u-1] is user u's coupon.
func issueCoupons(ctx context.Context, coupons *couponlab.Server, n, workers int, discount int64) ([]uint64, error) {
	tmpl, err := coupons.CreateTemplate(ctx, "bench", discount, 1000)
	if err != nil {
		return nil, err
	}
	couponOf := make([]uint64, n)
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				id, err := coupons.Issue(ctx, tmpl, uint64(i+1))
				if err != nil {
					errs <- fmt.Errorf("issue user %d a coupon: %w", i+1, err)
					return
				}
				couponOf[i] = id
			}
		})
	}
	wg.Wait()
	close(errs)
	return couponOf, <-errs
}

// checkCouponsLocked checks the purchases' effects: on the coupon service,
// n coupons LOCKED and none in any other status; in the purchase side's
// order database, n orders with the discount.
func checkCouponsLocked(ctx context.Context, coupons *couponlab.Server, purchase *orderlab.OrderAPI, n int, discount int64) error {
	byStatus, err := coupons.CountByStatus(ctx)
	if err != nil {
		return err
	}
	if want := map[string]int64{"LOCKED": int64(n)}; !maps.Equal(byStatus, want) {
		return fmt.Errorf("coupons by status after %d purchases: %v, want %v", n, byStatus, want)
	}
	var discounted int64
	if err := purchase.DB.WithContext(ctx).Table("orders").Where("coupon_id IS NOT NULL AND discount_amount = ?", discount).
		Count(&discounted).Error; err != nil {
		return err
	}
	if discounted != int64(n) {
		return fmt.Errorf("%d discounted orders after %d purchases", discounted, n)
	}
	return nil
}

// purchaseRound serves n POST /orders of one unit of each of two products,
// request i by user first+i (paying with couponFor(user) when couponFor is
// set), from one goroutine per product pair, each ordering its own pair;
// every answer must be 201.
func purchaseRound(ctx context.Context, api *orderlab.OrderAPI, products [][2]uint64, first uint64, n int, couponFor func(user uint64) uint64) error {
	h := api.Handler
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
	for _, pair := range products {
		wg.Go(func() {
			for user := range next {
				body := fmt.Sprintf(`{"items":[{"product_id":%d,"quantity":1},{"product_id":%d,"quantity":1}]`, pair[0], pair[1])
				if couponFor != nil {
					body += fmt.Sprintf(`,"coupon_id":%d`, couponFor(user))
				}
				body += "}"
				req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/orders", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				authz, aerr := api.Authorization(user)
				if aerr != nil {
					errMu.Lock()
					err = errors.Join(err, aerr)
					errMu.Unlock()
					return
				}
				req.Header.Set("Authorization", authz)
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
