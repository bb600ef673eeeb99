package lab_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/services/coupon/internal/assembly"
	"github.com/oncemall/oncemall/services/coupon/internal/coupontest"
	couponlab "github.com/oncemall/oncemall/services/coupon/lab"
)

// TestServe checks the served coupon service as the order service meets
// it. It is the service's own assembly: it declares what the service
// assembled for a test declares. A coupon issued through Serve's helper is locked by POST
// /internal/coupons/{id}/lock with the internal token, once, and the lock
// is in the database; without the token the route refuses and locks
// nothing.
func TestServe(t *testing.T) {
	const internal, admin = "serve-internal", "serve-admin"
	ctx := context.Background()
	s, err := couponlab.Serve(ctx, labEnv(t), "serve", internal, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if prod := coupontest.Start(t, nil, assembly.Options{}); !reflect.DeepEqual(s.Declared, prod.Declared) {
		t.Fatalf("Serve declared %+v, the service %+v", s.Declared, prod.Declared)
	}
	tmpl, err := s.CreateTemplate(ctx, "5 off", 500, 1000)
	if err != nil {
		t.Fatal(err)
	}
	id, err := s.Issue(ctx, tmpl, 7)
	if err != nil {
		t.Fatal(err)
	}

	lock := func(token string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/internal/coupons/%d/lock", s.URL, id),
			strings.NewReader(`{"order_no":"o-1","user_id":7,"order_amount":3998}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}

	if status, _ := lock(""); status != http.StatusUnauthorized {
		t.Fatalf("lock without the internal token: %d, want 401", status)
	}
	if got, err := s.CountByStatus(ctx); err != nil || !maps.Equal(got, map[string]int64{"UNUSED": 1}) {
		t.Fatalf("coupons after the refused lock: %v (%v), want one UNUSED", got, err)
	}
	status, body := lock(internal)
	if status != http.StatusOK || body["discount_amount"] != float64(500) || body["order_no"] != "o-1" {
		t.Fatalf("lock with the internal token: %d %v, want 200 with the 500 discount for o-1", status, body)
	}
	if got, err := s.CountByStatus(ctx); err != nil || !maps.Equal(got, map[string]int64{"LOCKED": 1}) {
		t.Fatalf("coupons after the lock: %v (%v), want one LOCKED", got, err)
	}
}
