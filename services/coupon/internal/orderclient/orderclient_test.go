package orderclient_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
	"github.com/oncemall/oncemall/services/coupon/internal/orderclient"
)

// TestOrderStateReadsTheContract: the client asks GET
// /internal/orders/{no} with the internal token (the order number escaped)
// and turns each answer of the order service into what the sweeper needs.
func TestOrderStateReadsTheContract(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		contentType string
		body        string
		want        coupon.OrderState
		unavailable bool // want coupon.ErrOrderServiceUnavailable
		bad         bool // want another error
	}{
		{"waiting", 200, "application/json", `{"order_no":"A/1","user_id":7,"status":"WAIT_PAY","pay_amount":4000}`, coupon.OrderWaitPay, false, false},
		{"paid", 200, "application/json", `{"order_no":"A/1","status":"PAID"}`, coupon.OrderPaid, false, false},
		{"cancelled", 200, "application/json", `{"order_no":"A/1","status":"CANCELLED"}`, coupon.OrderCancelled, false, false},
		{"not found", 404, "application/problem+json", `{"title":"Not Found","status":404}`, coupon.OrderNotFound, false, false},
		{"a 404 that is not the order service's", 404, "text/plain", "404 page not found", "", false, true},
		{"refused token", 401, "application/problem+json", `{"status":401}`, "", false, true},
		{"server error", 503, "application/problem+json", `{"status":503}`, "", true, false},
		{"another order", 200, "application/json", `{"order_no":"B","status":"CANCELLED"}`, "", false, true},
		{"unknown status", 200, "application/json", `{"order_no":"A/1","status":"SHIPPED"}`, "", false, true},
		{"not JSON", 200, "application/json", `{"order_no":`, "", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodGet || r.URL.EscapedPath() != "/internal/orders/A%2F1" || r.Header.Get("Authorization") != "Bearer tok" {
					t.Errorf("asked %s %s with %q", r.Method, r.URL.EscapedPath(), r.Header.Get("Authorization"))
				}
				w.Header().Set("Content-Type", tt.contentType)
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			got, err := orderclient.New(srv.URL+"/", "tok", &http.Client{Timeout: time.Second}).OrderState(context.Background(), "A/1")
			switch {
			case tt.unavailable && !errors.Is(err, coupon.ErrOrderServiceUnavailable):
				t.Fatalf("err = %v, want unavailable", err)
			case tt.bad && (err == nil || errors.Is(err, coupon.ErrOrderServiceUnavailable)):
				t.Fatalf("err = %v, want a bad answer (not unavailable)", err)
			case !tt.unavailable && !tt.bad && (err != nil || got != tt.want):
				t.Fatalf("= %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestOrderStateUnreachableIsUnavailable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := orderclient.New(url, "tok", &http.Client{Timeout: time.Second}).OrderState(context.Background(), "A")
	if !errors.Is(err, coupon.ErrOrderServiceUnavailable) {
		t.Fatalf("err = %v, want unavailable", err)
	}
}
