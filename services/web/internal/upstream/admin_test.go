package upstream_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/web/internal/upstream"
)

// TestFindingsReadsBothShapes: the order and coupon reconcilers answer a
// list of anomalies, the payment reconciler a list per kind; both come out
// as findings with the operator's token sent, and an empty answer as none.
func TestFindingsReadsBothShapes(t *testing.T) {
	answers := map[string]string{
		"/coupon/admin/reconcile":  `{"anomalies":[{"kind":"order_deducted_more_than_once","order_no":"O1","coupon_id":3,"count":2}]}`,
		"/order/admin/reconcile":   `{"anomalies":[]}`,
		"/payment/admin/reconcile": `{"empty":false,"report":{"multiple_records":[{"out_trade_no":"O2","records":2}],"missing_events":["O3"],"late_refunds":[]}}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer op-token" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(answers[r.URL.Path]))
	}))
	defer srv.Close()
	c, err := upstream.New(upstream.URLs{Order: srv.URL + "/order", Coupon: srv.URL + "/coupon", Payment: srv.URL + "/payment"},
		&http.Client{Timeout: 2 * time.Second}, nil)
	testenv.Must(t, err)
	who := upstream.Caller{Token: "op-token", UserID: 1}
	for service, want := range map[string][]upstream.Finding{
		"coupon":  {{Kind: "order_deducted_more_than_once", Detail: "count=2 coupon_id=3 order_no=O1"}},
		"order":   nil,
		"payment": {{Kind: "missing_events", Detail: "O3"}, {Kind: "multiple_records", Detail: "out_trade_no=O2 records=2"}},
	} {
		got, err := c.Findings(context.Background(), who, service)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v, %v; want %+v", service, got, err, want)
		}
	}
	if _, err := c.Findings(context.Background(), upstream.Caller{Token: "customer"}, "order"); upstream.StatusOf(err) != http.StatusUnauthorized {
		t.Errorf("a refused token: %v, want the service's 401", err)
	}
}
