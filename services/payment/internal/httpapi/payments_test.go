package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// orderService stands in for the order service's GET /orders/:no, the
// payment service's HTTP peer.
func orderService(t *testing.T, orders map[string]gin.H) *httptest.Server {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.GET("/orders/:no", func(c *gin.Context) {
		o, ok := orders[c.Param("no")]
		if !ok {
			c.JSON(http.StatusNotFound, gin.H{"title": "Not Found", "status": 404})
			return
		}
		c.JSON(http.StatusOK, o)
	})
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return srv
}

type paymentJSON struct {
	OutTradeNo     string `json:"out_trade_no"`
	OrderNo        string `json:"order_no"`
	Amount         int64  `json:"amount"`
	Status         string `json:"status"`
	PlatformSerial string `json:"platform_serial"`
}

// TestCreatePaymentChargesAndGetsPaid: POST /payments takes the amount from
// the order service, asks the platform to charge, and the platform's
// notification makes the payment PAID; creation is idempotent per key and
// per order.
func TestCreatePaymentChargesAndGetsPaid(t *testing.T) {
	orders := orderService(t, map[string]gin.H{
		"O-1":    {"order_no": "O-1", "amount": 1999, "status": "WAIT_PAY"},
		"O-paid": {"order_no": "O-paid", "amount": 500, "status": "PAID"},
	})
	f := newFixtureWithPlatform(t, orders.URL)

	key := func(k string) http.Header { return http.Header{"Idempotency-Key": {k + testenv.RandomSuffix(8)}} }

	if status, body := f.post("/payments", []byte(`{"order_no":"O-1"}`), nil); status != http.StatusBadRequest {
		t.Fatalf("without Idempotency-Key: %d %s, want 400", status, body)
	}
	k := key("k1-")
	status, body := f.post("/payments", []byte(`{"order_no":"O-1"}`), k)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, body)
	}
	var p paymentJSON
	_ = json.Unmarshal(body, &p)
	if p.Amount != 1999 || p.Status != "WAIT_PAY" || p.OrderNo != "O-1" || !strings.HasPrefix(p.OutTradeNo, "P") {
		t.Fatalf("created %+v", p)
	}
	// The same key replays the same answer.
	if s2, b2 := f.post("/payments", []byte(`{"order_no":"O-1"}`), k); s2 != status || string(b2) != string(body) {
		t.Fatalf("replay with the same key: %d %s, want %d %s", s2, b2, status, body)
	}
	// A new key for the same order finds the same payment.
	s3, b3 := f.post("/payments", []byte(`{"order_no":"O-1"}`), key("k2-"))
	var p3 paymentJSON
	_ = json.Unmarshal(b3, &p3)
	if s3 != http.StatusOK || p3.OutTradeNo != p.OutTradeNo {
		t.Fatalf("second create for the order: %d %s, want 200 with %s", s3, b3, p.OutTradeNo)
	}

	// The platform notifies; the payment is paid once.
	if err := f.sim.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	s4, b4 := f.get("/payments/"+p.OutTradeNo, nil)
	var got paymentJSON
	_ = json.Unmarshal(b4, &got)
	if s4 != http.StatusOK || got.Status != "PAID" || got.PlatformSerial == "" {
		t.Fatalf("GET after the notification: %d %s", s4, b4)
	}
	if e := f.effects(p.OutTradeNo); e.Records != 1 || e.Events != 1 {
		t.Fatalf("effects %+v", e)
	}

	for _, tc := range []struct {
		name, body string
		want       int
	}{
		{"unknown order", `{"order_no":"O-none"}`, http.StatusNotFound},
		{"order already paid", `{"order_no":"O-paid"}`, http.StatusConflict},
		{"malformed body", `{"order`, http.StatusBadRequest},
	} {
		before := f.snapshot()
		if status, body := f.post("/payments", []byte(tc.body), key("k-"+tc.name)); status != tc.want {
			t.Fatalf("%s: %d %s, want %d", tc.name, status, body, tc.want)
		}
		if after := f.snapshot(); after.Payments != before.Payments {
			t.Fatalf("%s created a payment", tc.name)
		}
	}
	if status, _ := f.get("/payments/P-none", nil); status != http.StatusNotFound {
		t.Fatalf("GET unknown payment: %d, want 404", status)
	}
}

// TestCreatePaymentConcurrentlyForOneOrder: 20 creates for the same order
// with different keys race; one payment exists afterwards.
func TestCreatePaymentConcurrentlyForOneOrder(t *testing.T) {
	orders := orderService(t, map[string]gin.H{"O-9": {"order_no": "O-9", "amount": 700, "status": "WAIT_PAY"}})
	f := newFixtureWithPlatform(t, orders.URL)
	var wg sync.WaitGroup
	nos := make([]string, 20)
	for i := range nos {
		wg.Go(func() {
			status, body := f.post("/payments", []byte(`{"order_no":"O-9"}`), http.Header{"Idempotency-Key": {testenv.RandomSuffix(16)}})
			var p paymentJSON
			_ = json.Unmarshal(body, &p)
			if status/100 != 2 {
				t.Errorf("create: %d %s", status, body)
			}
			nos[i] = p.OutTradeNo
		})
	}
	wg.Wait()
	if s := f.snapshot(); s.Payments != 1 {
		t.Fatalf("%d payments for one order", s.Payments)
	}
	for _, no := range nos {
		if no != nos[0] {
			t.Fatalf("creates answered different payments: %v", nos)
		}
	}
}
