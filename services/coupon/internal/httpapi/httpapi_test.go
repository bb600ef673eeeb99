package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
	"github.com/oncemall/oncemall/services/coupon/internal/httpapi"
	"github.com/oncemall/oncemall/services/coupon/internal/store"
	"github.com/oncemall/oncemall/services/coupon/migrations"
)

const adminToken = "test-admin-token"

func newServer(t *testing.T) (http.Handler, *gorm.DB, *app.App) {
	t.Helper()
	gin.SetMode(gin.TestMode)
	db := testenv.DB(t, migrations.Source, outbox.Migrations)
	a, err := app.New(store.New(db, func() {}), app.DefaultConfig(), testenv.Logger(t), prometheus.NewRegistry())
	testenv.Must(t, err)
	e := gin.New()
	httpapi.New(a, httpapi.Options{Log: testenv.Logger(t), Admin: httpserver.AdminAuth(adminToken)}).Register(e)
	return e, db, a
}

func do(t *testing.T, h http.Handler, method, path, body string, headers ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func decode[T any](t *testing.T, w *httptest.ResponseRecorder) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
		t.Fatalf("decode %q: %v", w.Body.String(), err)
	}
	return v
}

func count(t *testing.T, db *gorm.DB, table string) int64 {
	t.Helper()
	var n int64
	testenv.Must(t, db.Table(table).Count(&n).Error)
	return n
}

func TestIssueAndReadCoupons(t *testing.T) {
	h, _, _ := newServer(t)
	w := do(t, h, http.MethodPost, "/coupon-templates", `{"name":"10 off","discount_amount":1000,"min_order_amount":5000}`)
	if w.Code != http.StatusCreated {
		t.Fatalf("create template: %d %s", w.Code, w.Body)
	}
	tpl := decode[struct{ ID uint64 }](t, w)

	w = do(t, h, http.MethodPost, "/coupons", `{"template_id":`+itoa(tpl.ID)+`,"user_id":42}`)
	if w.Code != http.StatusCreated {
		t.Fatalf("issue: %d %s", w.Code, w.Body)
	}
	type couponBody struct {
		ID         uint64
		TemplateID uint64 `json:"template_id"`
		UserID     uint64 `json:"user_id"`
		Status     string
	}
	c := decode[couponBody](t, w)
	if c.Status != "UNUSED" || c.UserID != 42 || c.TemplateID != tpl.ID {
		t.Fatalf("issued %+v", c)
	}

	w = do(t, h, http.MethodGet, "/coupons/"+itoa(c.ID), "")
	if got := decode[couponBody](t, w); w.Code != http.StatusOK || got != c {
		t.Fatalf("get: %d %+v, want %+v", w.Code, got, c)
	}
	w = do(t, h, http.MethodGet, "/users/42/coupons", "")
	list := decode[struct{ Coupons []couponBody }](t, w)
	if w.Code != http.StatusOK || len(list.Coupons) != 1 || list.Coupons[0] != c {
		t.Fatalf("list: %d %s", w.Code, w.Body)
	}
	w = do(t, h, http.MethodGet, "/users/43/coupons", "")
	if w.Code != http.StatusOK || strings.TrimSpace(w.Body.String()) != `{"coupons":[]}` {
		t.Fatalf("empty list: %d %s", w.Code, w.Body)
	}
}

// TestBadInputIsRefusedWithProblemAndWritesNothing: every malformed request
// is answered 4xx in problem+json, and no row is written.
func TestBadInputIsRefusedWithProblemAndWritesNothing(t *testing.T) {
	h, db, _ := newServer(t)
	tests := []struct {
		name, method, path, body string
		status                   int
	}{
		{"not JSON", http.MethodPost, "/coupons", `{"template_id":`, http.StatusBadRequest},
		{"unknown field", http.MethodPost, "/coupons", `{"template_id":1,"user_id":1,"admin":true}`, http.StatusBadRequest},
		{"negative id", http.MethodPost, "/coupons", `{"template_id":-1,"user_id":1}`, http.StatusBadRequest},
		{"missing user", http.MethodPost, "/coupons", `{"template_id":1}`, http.StatusBadRequest},
		{"trailing data", http.MethodPost, "/coupons", `{"template_id":1,"user_id":1} {}`, http.StatusBadRequest},
		{"unknown template", http.MethodPost, "/coupons", `{"template_id":999,"user_id":1}`, http.StatusUnprocessableEntity},
		{"template without name", http.MethodPost, "/coupon-templates", `{"name":"","discount_amount":100}`, http.StatusBadRequest},
		{"template with zero discount", http.MethodPost, "/coupon-templates", `{"name":"x","discount_amount":0}`, http.StatusBadRequest},
		{"non-numeric coupon id", http.MethodGet, "/coupons/abc", "", http.StatusBadRequest},
		{"zero user id", http.MethodGet, "/users/0/coupons", "", http.StatusBadRequest},
		{"missing coupon", http.MethodGet, "/coupons/999", "", http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := do(t, h, tt.method, tt.path, tt.body)
			if w.Code != tt.status {
				t.Fatalf("status %d %s, want %d", w.Code, w.Body, tt.status)
			}
			if ct := w.Header().Get("Content-Type"); ct != problem.ContentType {
				t.Fatalf("content type %q", ct)
			}
			if p := decode[problem.Details](t, w); p.Status != tt.status || p.Detail == "" {
				t.Fatalf("problem %+v", p)
			}
		})
	}
	for _, table := range []string{"coupon_template", "coupons"} {
		if n := count(t, db, table); n != 0 {
			t.Fatalf("%d rows in %s after refused requests", n, table)
		}
	}
}

func TestReconcileNeedsTheAdminTokenAndListsAnomalies(t *testing.T) {
	h, db, a := newServer(t)
	if w := do(t, h, http.MethodGet, "/admin/reconcile", ""); w.Code != http.StatusUnauthorized {
		t.Fatalf("no token: %d", w.Code)
	}
	if w := do(t, h, http.MethodGet, "/admin/reconcile", "", "Authorization", "Bearer wrong"); w.Code != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", w.Code)
	}
	auth := []string{"Authorization", "Bearer " + adminToken}
	w := do(t, h, http.MethodGet, "/admin/reconcile", "", auth...)
	if w.Code != http.StatusOK || strings.TrimSpace(w.Body.String()) != `{"anomalies":[]}` {
		t.Fatalf("clean: %d %s", w.Code, w.Body)
	}

	// A coupon marked USED with no ledger row behind it.
	ctx := context.Background()
	tpl, err := a.CreateTemplate(ctx, coupon.Template{Name: "x", DiscountAmount: 1})
	testenv.Must(t, err)
	c, err := a.IssueCoupon(ctx, tpl.ID, 1)
	testenv.Must(t, err)
	testenv.Must(t, db.Exec("UPDATE coupons SET status = 'USED', used_order_no = 'LOST' WHERE id = ?", c.ID).Error)
	w = do(t, h, http.MethodGet, "/admin/reconcile", "", auth...)
	want := `{"anomalies":[{"kind":"used_coupon_without_deduction","order_no":"LOST","coupon_id":` + itoa(c.ID) + `}]}`
	if w.Code != http.StatusOK || strings.TrimSpace(w.Body.String()) != want {
		t.Fatalf("anomaly: %d %s, want %s", w.Code, w.Body, want)
	}
}

// TestOperatorRoutesWithoutAGuardRefuseEverything: an API built without
// Options.Admin fails closed.
func TestOperatorRoutesWithoutAGuardRefuseEverything(t *testing.T) {
	_, _, a := newServer(t)
	e := gin.New()
	httpapi.New(a, httpapi.Options{Log: testenv.Logger(t)}).Register(e)
	if w := do(t, e, http.MethodGet, "/admin/reconcile", "", "Authorization", "Bearer "+adminToken); w.Code != http.StatusForbidden {
		t.Fatalf("reconcile without a guard: %d %s, want 403", w.Code, w.Body)
	}
}

func itoa(n uint64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
