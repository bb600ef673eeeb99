package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
	"github.com/oncemall/oncemall/services/payment/internal/paymenttest"
)

type paymentJSON struct {
	OutTradeNo     string `json:"out_trade_no"`
	OrderNo        string `json:"order_no"`
	Amount         int64  `json:"amount"`
	Status         string `json:"status"`
	PlatformSerial string `json:"platform_serial"`
}

// TestCreatePaymentChargesThePayAmountForTheOwner: POST /payments reads the
// order as its caller (the verified user named, the internal token presented),
// charges the order's pay_amount (not its total), stores the owner, and the
// platform's notification makes the payment PAID; creation is idempotent
// per key and per order; GET /payments/:no shows it to the owner only.
func TestCreatePaymentChargesThePayAmountForTheOwner(t *testing.T) {
	orders := newOrderService(t, map[string]testOrder{"O-1": {UserID: 7, PayAmount: 1999, Status: "WAIT_PAY"}})
	f := newFixtureWithPlatform(t, orders.URL)

	status, body := f.payAs(7, "O-1")
	if status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, body)
	}
	var p paymentJSON
	_ = json.Unmarshal(body, &p)
	if p.Amount != 1999 || p.Status != "WAIT_PAY" || p.OrderNo != "O-1" || !strings.HasPrefix(p.OutTradeNo, "P") {
		t.Fatalf("created %+v, want pay_amount 1999 charged", p)
	}
	if got := f.paymentOf("O-1"); got.UserID != 7 {
		t.Fatalf("stored user %d, want the order's owner 7", got.UserID)
	}
	for _, a := range orders.authorizations() {
		if a != "Bearer "+paymenttest.InternalToken {
			t.Fatalf("the order service was called with Authorization %q, want the internal token", a)
		}
	}
	// The same key replays the same answer.
	h := owner(7)
	h.Set("Idempotency-Key", "same-key-"+testenv.RandomSuffix(8))
	s1, b1 := f.post("/payments", []byte(`{"order_no":"O-1"}`), h)
	if s2, b2 := f.post("/payments", []byte(`{"order_no":"O-1"}`), h); s2 != s1 || string(b2) != string(b1) {
		t.Fatalf("replay with the same key: %d %s, want %d %s", s2, b2, s1, b1)
	}
	// A new key for the same order finds the same payment.
	s3, b3 := f.payAs(7, "O-1")
	var p3 paymentJSON
	_ = json.Unmarshal(b3, &p3)
	if s3 != http.StatusOK || p3.OutTradeNo != p.OutTradeNo {
		t.Fatalf("second create for the order: %d %s, want 200 with %s", s3, b3, p.OutTradeNo)
	}

	// The platform notifies; the payment is paid once.
	f.waitSim()
	s4, b4 := f.get("/payments/"+p.OutTradeNo, owner(7))
	var got paymentJSON
	_ = json.Unmarshal(b4, &got)
	if s4 != http.StatusOK || got.Status != "PAID" || got.PlatformSerial == "" {
		t.Fatalf("GET by the owner after the notification: %d %s", s4, b4)
	}
	if e := f.effects(p.OutTradeNo); e.Records != 1 || e.Events != 1 {
		t.Fatalf("effects %+v", e)
	}
	// Anyone else is told it does not exist; no caller at all is a bad request.
	if s, _ := f.get("/payments/"+p.OutTradeNo, owner(8)); s != http.StatusNotFound {
		t.Fatalf("GET by another user: %d, want 404", s)
	}
	if s, _ := f.get("/payments/"+p.OutTradeNo, nil); s != http.StatusUnauthorized {
		t.Fatalf("GET without a token: %d, want 401", s)
	}
	if s, _ := f.get("/payments/P-none", owner(7)); s != http.StatusNotFound {
		t.Fatalf("GET unknown payment: %d, want 404", s)
	}
	// A paid order's payment is answered as it is (200), never charged again.
	if s, b := f.payAs(7, "O-1"); s != http.StatusOK {
		t.Fatalf("paying the paid order again: %d %s", s, b)
	}
}

// TestCreatePaymentRefusals: every refused POST /payments answers
// problem+json with its status and writes nothing (no payment, no refund,
// no outbox row, no state change).
func TestCreatePaymentRefusals(t *testing.T) {
	orders := newOrderService(t, map[string]testOrder{
		"O-mine":      {UserID: 7, PayAmount: 500, Status: "WAIT_PAY"},
		"O-paid":      {UserID: 7, PayAmount: 500, Status: "PAID"},
		"O-cancelled": {UserID: 7, PayAmount: 500, Status: "CANCELLED"},
		"O-free":      {UserID: 7, PayAmount: 0, Status: "WAIT_PAY"},
		"O-closed":    {UserID: 7, PayAmount: 500, Status: "WAIT_PAY"},
	})
	f := newFixtureWithPlatform(t, orders.URL)
	// The order service's close reached this service first: a placeholder.
	if status, outcome := f.closeOrder("O-closed"); status != http.StatusOK || outcome != "closed" {
		t.Fatalf("close: %d %s", status, outcome)
	}
	key := func() string { return "key-" + testenv.RandomSuffix(12) }
	iss := f.svc.Issuer
	bearer := func(token string) http.Header {
		return http.Header{"Idempotency-Key": {key()}, "Authorization": {"Bearer " + token}}
	}
	for _, tc := range []struct {
		name   string
		header http.Header
		body   string
		want   int
		detail string // a part of the problem's detail
	}{
		{"no token", http.Header{"Idempotency-Key": {key()}}, `{"order_no":"O-mine"}`, http.StatusUnauthorized, "bearer token"},
		{"only X-User-ID", http.Header{"Idempotency-Key": {key()}, "X-User-Id": {"7"}}, `{"order_no":"O-mine"}`, http.StatusUnauthorized, "bearer token"},
		{"a forged token", bearer(iss.Forged(t, 7, auth.RoleCustomer)), `{"order_no":"O-mine"}`, http.StatusUnauthorized, "invalid or expired"},
		{"an expired token", bearer(iss.Expired(t, 7, auth.RoleCustomer)), `{"order_no":"O-mine"}`, http.StatusUnauthorized, "invalid or expired"},
		{"another audience's token", bearer(iss.ForAudience(t, "order-admin", 7, auth.RoleCustomer)), `{"order_no":"O-mine"}`, http.StatusUnauthorized, "invalid or expired"},
		{"a tampered token", bearer(iss.Tampered(t, 7, auth.RoleCustomer)), `{"order_no":"O-mine"}`, http.StatusUnauthorized, "invalid or expired"},
		{"no Idempotency-Key", owner(7), `{"order_no":"O-mine"}`, http.StatusBadRequest, "Idempotency-Key"},
		{"malformed JSON", nil, `{"order`, http.StatusBadRequest, "malformed"},
		{"a client-sent amount", nil, `{"order_no":"O-mine","amount":1}`, http.StatusBadRequest, "amount"},
		{"no order_no", nil, `{}`, http.StatusBadRequest, "order_no"},
		{"another user's order", owner(8), `{"order_no":"O-mine"}`, http.StatusNotFound, "not found"},
		{"unknown order", nil, `{"order_no":"O-none"}`, http.StatusNotFound, "not found"},
		{"paid order", nil, `{"order_no":"O-paid"}`, http.StatusConflict, "not waiting"},
		{"cancelled order", nil, `{"order_no":"O-cancelled"}`, http.StatusConflict, "closed"},
		{"order closed here first", nil, `{"order_no":"O-closed"}`, http.StatusConflict, "closed"},
		{"nothing to pay", nil, `{"order_no":"O-free"}`, http.StatusConflict, "pay_amount"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.header
			if h == nil {
				h = owner(7)
			}
			if h.Get("Idempotency-Key") == "" && tc.name != "no Idempotency-Key" {
				h.Set("Idempotency-Key", key())
			}
			before := f.snapshot()
			req, _ := http.NewRequest(http.MethodPost, f.svc.URL+"/payments", bytes.NewReader([]byte(tc.body)))
			req.Header = h.Clone()
			req.Header.Set("Content-Type", "application/json")
			status, hdr, body := f.doFull(req)
			if status != tc.want || !isProblem(hdr) || !strings.Contains(string(body), tc.detail) {
				t.Fatalf("%d %s %s, want %d problem+json mentioning %q", status, hdr.Get("Content-Type"), body, tc.want, tc.detail)
			}
			if after := f.snapshot(); !reflect.DeepEqual(before, after) {
				t.Fatalf("tables changed:\nbefore %+v\nafter  %+v", before, after)
			}
		})
	}
}

// TestCreatePaymentConcurrentlyForOneOrder: 20 creates for the same order
// with different keys race; one payment exists afterwards.
func TestCreatePaymentConcurrentlyForOneOrder(t *testing.T) {
	orders := newOrderService(t, map[string]testOrder{"O-9": {UserID: 7, PayAmount: 700, Status: "WAIT_PAY"}})
	f := newFixtureWithPlatform(t, orders.URL)
	var wg sync.WaitGroup
	nos := make([]string, 20)
	for i := range nos {
		wg.Go(func() {
			status, body := f.payAs(7, "O-9")
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

// TestCreatePaymentWhenTheOrderServiceFails: an order service that answers
// 5xx, or is not there at all, makes POST /payments a 503 problem with
// Retry-After, not a 500: nothing was decided. No payment is written, and
// the Idempotency-Key is released, so the same request with the same key
// succeeds once the order service is back.
func TestCreatePaymentWhenTheOrderServiceFails(t *testing.T) {
	orders := newOrderService(t, map[string]testOrder{"O-1": {UserID: 7, PayAmount: 1999, Status: "WAIT_PAY"}})
	var mode atomic.Value // "500", "gone" or "up"
	mode.Store("500")
	target, _ := url.Parse(orders.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch mode.Load() {
		case "500":
			http.Error(w, "boom", http.StatusInternalServerError)
		case "gone":
			// Hang up without an answer, as a crashed replica does.
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		default:
			proxy.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(front.Close)
	f := newFixtureWithPlatform(t, front.URL)

	h := owner(7)
	h.Set("Idempotency-Key", "down-"+testenv.RandomSuffix(8))
	pay := func() (int, http.Header, []byte) {
		req, err := http.NewRequest(http.MethodPost, f.svc.URL+"/payments", strings.NewReader(`{"order_no":"O-1"}`))
		testenv.Must(t, err)
		req.Header = h.Clone()
		req.Header.Set("Content-Type", "application/json")
		return f.doFull(req)
	}
	for _, m := range []string{"500", "gone"} {
		mode.Store(m)
		status, hdr, body := pay()
		if status != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" ||
			!strings.HasPrefix(hdr.Get("Content-Type"), "application/problem+json") {
			t.Fatalf("order service %s: %d %v %s, want a 503 problem with Retry-After", m, status, hdr, body)
		}
		if strings.Contains(string(body), front.URL) {
			t.Fatalf("the answer names the order service's address: %s", body)
		}
		if _, err := f.svc.Store.GetByOrder(context.Background(), "O-1"); !errors.Is(err, payment.ErrNotFound) {
			t.Fatalf("order service %s: a payment was written (%v)", m, err)
		}
	}
	mode.Store("up")
	if status, _, body := pay(); status != http.StatusCreated {
		t.Fatalf("the same request once the order service is back: %d %s, want 201", status, body)
	}
}
