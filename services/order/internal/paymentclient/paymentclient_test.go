package paymentclient_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/oncemall/oncemall/services/order/internal/order"
	"github.com/oncemall/oncemall/services/order/internal/paymentclient"
	"github.com/oncemall/oncemall/services/order/internal/stubs"
)

// TestCloseCharge: against the payment stub, closing a charge answers
// closed or paid; a wrong token, a 5xx, an unknown outcome or no answer are
// order.ErrUnavailable, on which no order may be closed.
func TestCloseCharge(t *testing.T) {
	svc := stubs.NewPaymentService("token")
	defer svc.Close()
	svc.SetPaid("O-paid")
	c := paymentclient.New(svc.URL, "token", http.DefaultClient)
	ctx := context.Background()
	if out, err := c.CloseCharge(ctx, "O-1"); err != nil || out != order.ChargeClosed {
		t.Fatalf("close: %s %v", out, err)
	}
	if out, err := c.CloseCharge(ctx, "O-paid"); err != nil || out != order.ChargePaid {
		t.Fatalf("close a paid charge: %s %v", out, err)
	}
	if svc.Closes("O-1") != 1 {
		t.Fatalf("%d close calls for O-1", svc.Closes("O-1"))
	}
	if _, err := paymentclient.New(svc.URL, "other", http.DefaultClient).CloseCharge(ctx, "O-1"); !errors.Is(err, order.ErrUnavailable) {
		t.Fatalf("wrong token: %v", err)
	}
	svc.SetDown(true)
	if _, err := c.CloseCharge(ctx, "O-1"); !errors.Is(err, order.ErrUnavailable) {
		t.Fatalf("payment service down: %v", err)
	}
	for name, h := range map[string]http.HandlerFunc{
		"unknown outcome": func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"outcome":"maybe"}`)) },
		"not JSON":        func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`closed`)) },
		"no answer":       func(w http.ResponseWriter, _ *http.Request) { panic(http.ErrAbortHandler) },
	} {
		srv := httptest.NewServer(h)
		if _, err := paymentclient.New(srv.URL, "token", http.DefaultClient).CloseCharge(ctx, "O-1"); !errors.Is(err, order.ErrUnavailable) {
			t.Errorf("%s: %v, want ErrUnavailable", name, err)
		}
		srv.Close()
	}
}
