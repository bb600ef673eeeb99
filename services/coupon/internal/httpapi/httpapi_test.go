package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/pkg/testkit/apitest"
	"github.com/oncemall/oncemall/pkg/testkit/authtest"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/assembly"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
	"github.com/oncemall/oncemall/services/coupon/internal/coupontest"
	"github.com/oncemall/oncemall/services/coupon/internal/httpapi"
)

// spec is the routes' contract, docs/api/coupon.yaml: every request these
// tests send and every answer they get is checked against it.
var spec = apitest.MustLoad("coupon.yaml")

// TestMain fails the package when an operation of coupon.yaml is never
// exercised here, but for the routes pkg/platform serves and tests.
func TestMain(m *testing.M) {
	const platform = "served and tested by pkg/platform and pkg/httpserver, not by these handlers"
	apitest.Main(m, spec, map[string]string{
		"POST /admin/outbox/redrive": platform,
		"GET /healthz":               platform,
		"GET /readyz":                platform,
		"GET /metrics":               platform,
	})
}

const (
	adminToken    = "test-admin-token"
	internalToken = "test-internal-token"
)

var (
	asAdmin    = []string{"Authorization", "Bearer " + adminToken}
	asService  = []string{"Authorization", "Bearer " + internalToken}
	asUser42   = []string{signedInAs, "42"}
	ctx        = context.Background()
	noSweeping = noOrders{}
)

// noOrders is the sweeper's order service; the API never sweeps.
type noOrders struct{}

func (noOrders) OrderState(context.Context, string) (coupon.OrderState, error) {
	return "", coupon.ErrOrderServiceUnavailable
}

// newServer starts the coupon service as it runs (coupontest: the
// platform's server and middleware in front of these routes) with the
// test's tokens, and returns a handler that forwards to it through the
// contract's checks. Admission is unlimited (the racing tests count what the
// routes do, not what the platform sheds), and the retry job waits an hour
// (a test runs the passes it needs itself).
func newServer(t *testing.T) (http.Handler, *gorm.DB, *assembly.Parts) {
	t.Helper()
	svc := coupontest.Start(t, map[string]string{"ADMIN_TOKEN": adminToken, "INTERNAL_TOKEN": internalToken,
		"HTTP_MAX_IN_FLIGHT": "0", "COUPON_RETRY_SCHEDULE": "@every 1h"}, assembly.Options{Orders: noSweeping})
	base, err := url.Parse(svc.URL)
	testenv.Must(t, err)
	return signIn(t, svc.Issuer, spec.Handler(t, httputil.NewSingleHostReverseProxy(base))), svc.DB(), svc.Parts
}

// signedInAs is the test client's own header: a request carrying it (a user
// id) is sent with that customer's access token instead, as a signed-in
// client would, before the contract and the service see it.
const signedInAs = "X-Test-Signed-In-As"

// signIn is h behind a client that holds the customers' tokens of iss.
func signIn(t *testing.T, iss *authtest.Issuer, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user := r.Header.Get(signedInAs); user != "" {
			id, err := strconv.ParseUint(user, 10, 64)
			testenv.Must(t, err)
			r.Header.Del(signedInAs)
			r.Header.Set("Authorization", "Bearer "+iss.Token(t, id, auth.RoleCustomer))
		}
		h.ServeHTTP(w, r)
	})
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

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// seed creates a template (no minimum, discount 1000) and issues a coupon of
// it to user 42, both as the operator.
func seed(t *testing.T, h http.Handler) (tplID, couponID uint64) {
	t.Helper()
	w := do(t, h, http.MethodPost, "/admin/coupon-templates", `{"name":"10 off","discount_amount":1000}`, asAdmin...)
	if w.Code != http.StatusCreated {
		t.Fatalf("create template: %d %s", w.Code, w.Body)
	}
	tplID = decode[struct{ ID uint64 }](t, w).ID
	w = do(t, h, http.MethodPost, "/admin/coupons", `{"template_id":`+itoa(tplID)+`,"user_id":42}`, asAdmin...)
	if w.Code != http.StatusCreated {
		t.Fatalf("issue: %d %s", w.Code, w.Body)
	}
	return tplID, decode[struct{ ID uint64 }](t, w).ID
}

type couponBody struct {
	ID            uint64
	TemplateID    uint64 `json:"template_id"`
	UserID        uint64 `json:"user_id"`
	Status        string
	LockedOrderNo string `json:"locked_order_no"`
	LockedUntil   string `json:"locked_until"`
	UsedOrderNo   string `json:"used_order_no"`
	ExpiresAt     string `json:"expires_at"`
}

// TestTheOperatorIssuesAndOnlyTheOwnerReads: templates and coupons are made
// behind the admin token; a coupon and a coupon list are answered to their
// owner only.
func TestTheOperatorIssuesAndOnlyTheOwnerReads(t *testing.T) {
	h, _, _ := newServer(t)
	w := do(t, h, http.MethodPost, "/admin/coupon-templates", `{"name":"10 off 50","discount_amount":1000,"min_order_amount":5000,"valid_days":7}`, asAdmin...)
	tpl := decode[struct {
		ID        uint64
		ValidDays int `json:"valid_days"`
	}](t, w)
	if w.Code != http.StatusCreated || tpl.ValidDays != 7 {
		t.Fatalf("create template: %d %s", w.Code, w.Body)
	}
	if w := do(t, h, http.MethodGet, "/admin/coupon-templates/"+itoa(tpl.ID), "", asAdmin...); w.Code != http.StatusOK {
		t.Fatalf("read template: %d %s", w.Code, w.Body)
	}
	w = do(t, h, http.MethodPost, "/admin/coupons", `{"template_id":`+itoa(tpl.ID)+`,"user_id":42}`, asAdmin...)
	c := decode[couponBody](t, w)
	if w.Code != http.StatusCreated || c.Status != "UNUSED" || c.UserID != 42 || c.TemplateID != tpl.ID || c.ExpiresAt == "" {
		t.Fatalf("issue: %d %s", w.Code, w.Body)
	}

	w = do(t, h, http.MethodGet, "/coupons/"+itoa(c.ID), "", asUser42...)
	if got := decode[couponBody](t, w); w.Code != http.StatusOK || got != c {
		t.Fatalf("the owner reads: %d %+v, want %+v", w.Code, got, c)
	}
	w = do(t, h, http.MethodGet, "/users/42/coupons", "", asUser42...)
	if list := decode[struct{ Coupons []couponBody }](t, w); w.Code != http.StatusOK || len(list.Coupons) != 1 || list.Coupons[0] != c {
		t.Fatalf("the owner lists: %d %s", w.Code, w.Body)
	}

	// Another user: the coupon is as missing as one that does not exist,
	// and another user's list is forbidden.
	other := []string{signedInAs, "43"}
	stranger := do(t, h, http.MethodGet, "/coupons/"+itoa(c.ID), "", other...)
	missing := do(t, h, http.MethodGet, "/coupons/"+itoa(c.ID+1000), "", other...)
	if stranger.Code != http.StatusNotFound || missing.Code != http.StatusNotFound ||
		stranger.Header().Get("Content-Type") != problem.ContentType {
		t.Fatalf("another user's coupon: %d %s; a missing one: %d", stranger.Code, stranger.Body, missing.Code)
	}
	if w := do(t, h, http.MethodGet, "/users/42/coupons", "", other...); w.Code != http.StatusForbidden || w.Header().Get("Content-Type") != problem.ContentType {
		t.Fatalf("another user's list: %d %s, want 403", w.Code, w.Body)
	}
	if w := do(t, h, http.MethodGet, "/users/43/coupons", "", other...); w.Code != http.StatusOK || strings.TrimSpace(w.Body.String()) != `{"coupons":[]}` {
		t.Fatalf("an empty list: %d %s", w.Code, w.Body)
	}
}

// TestRoutesAnswerOnlyTheirCallers: the operator routes need the admin
// token, the service routes the internal token (and the two are not
// interchangeable); the user routes need a customer's token.
func TestRoutesAnswerOnlyTheirCallers(t *testing.T) {
	h, db, _ := newServer(t)
	_, couponID := seed(t, h)
	tests := []struct {
		name, method, path, body string
		headers                  []string
		status                   int
	}{
		{"template without a token", http.MethodPost, "/admin/coupon-templates", `{"name":"x","discount_amount":1}`, nil, http.StatusUnauthorized},
		{"issue without a token", http.MethodPost, "/admin/coupons", `{"template_id":1,"user_id":42}`, nil, http.StatusUnauthorized},
		{"issue with the internal token", http.MethodPost, "/admin/coupons", `{"template_id":1,"user_id":42}`, asService, http.StatusUnauthorized},
		{"reconcile as a customer", http.MethodGet, "/admin/reconcile", "", asUser42, http.StatusForbidden},
		{"lock without a token", http.MethodPost, "/internal/coupons/" + itoa(couponID) + "/lock", `{"order_no":"O","user_id":42,"order_amount":5000}`, nil, http.StatusUnauthorized},
		{"lock with the admin token", http.MethodPost, "/internal/coupons/" + itoa(couponID) + "/lock", `{"order_no":"O","user_id":42,"order_amount":5000}`, asAdmin, http.StatusUnauthorized},
		{"release as a user", http.MethodPost, "/internal/coupons/" + itoa(couponID) + "/release", `{"order_no":"O"}`, asUser42, http.StatusUnauthorized},
		{"the old open template route", http.MethodPost, "/coupon-templates", `{"name":"x","discount_amount":1}`, nil, http.StatusNotFound},
		{"the old open issue route", http.MethodPost, "/coupons", `{"template_id":1,"user_id":42}`, nil, http.StatusNotFound},
		{"a coupon without a token", http.MethodGet, "/coupons/" + itoa(couponID), "", nil, http.StatusUnauthorized},
		{"a coupon with only X-User-ID", http.MethodGet, "/coupons/" + itoa(couponID), "", []string{auth.UserIDHeader, "42"}, http.StatusUnauthorized},
		{"a list without a token", http.MethodGet, "/users/42/coupons", "", nil, http.StatusUnauthorized},
		{"a list with only X-User-ID", http.MethodGet, "/users/42/coupons", "", []string{auth.UserIDHeader, "42"}, http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := do(t, h, tt.method, tt.path, tt.body, tt.headers...)
			if w.Code != tt.status {
				t.Fatalf("status %d %s, want %d", w.Code, w.Body, tt.status)
			}
		})
	}
	if n := count(t, db, "coupon_template"); n != 1 {
		t.Fatalf("%d templates, want the seeded one only", n)
	}
	if n := count(t, db, "coupons"); n != 1 {
		t.Fatalf("%d coupons, want the seeded one only", n)
	}
	var locked int64
	testenv.Must(t, db.Table("coupons").Where("status <> ?", "UNUSED").Count(&locked).Error)
	if locked != 0 {
		t.Fatal("a refused lock or release changed a coupon")
	}
}

type lockBody struct {
	CouponID       uint64 `json:"coupon_id"`
	OrderNo        string `json:"order_no"`
	DiscountAmount int64  `json:"discount_amount"`
	LockedUntil    string `json:"locked_until"`
}

// TestLockAndReleaseOverHTTP: the order service's two calls as the contract
// has them. A lock answers the discount and the deadline; the same call
// again answers the same lock; another order gets 422 not_available in
// problem+json; the holder's release answers true once, then false.
func TestLockAndReleaseOverHTTP(t *testing.T) {
	h, db, _ := newServer(t)
	_, couponID := seed(t, h)
	lockPath := "/internal/coupons/" + itoa(couponID) + "/lock"
	releasePath := "/internal/coupons/" + itoa(couponID) + "/release"

	w := do(t, h, http.MethodPost, lockPath, `{"order_no":"ORDER-1","user_id":42,"order_amount":5000}`, asService...)
	first := decode[lockBody](t, w)
	if w.Code != http.StatusOK || first.CouponID != couponID || first.OrderNo != "ORDER-1" || first.DiscountAmount != 1000 || first.LockedUntil == "" {
		t.Fatalf("lock: %d %s", w.Code, w.Body)
	}
	again := do(t, h, http.MethodPost, lockPath, `{"order_no":"ORDER-1","user_id":42,"order_amount":5000}`, asService...)
	if again.Code != http.StatusOK || again.Body.String() != w.Body.String() {
		t.Fatalf("the same lock again: %d %s, want %s", again.Code, again.Body, w.Body)
	}
	other := do(t, h, http.MethodPost, lockPath, `{"order_no":"ORDER-2","user_id":42,"order_amount":5000}`, asService...)
	p := decode[map[string]any](t, other)
	if other.Code != http.StatusUnprocessableEntity || other.Header().Get("Content-Type") != problem.ContentType ||
		p["reason"] != "not_available" || p["status"] != float64(422) {
		t.Fatalf("another order: %d %s, want 422 not_available", other.Code, other.Body)
	}
	var status string
	testenv.Must(t, db.Table("coupons").Where("id = ?", couponID).Pluck("locked_order_no", &status).Error)
	if status != "ORDER-1" {
		t.Fatalf("the coupon is locked by %q, want ORDER-1", status)
	}

	for i, want := range []string{`{"released":false}`, `{"released":true}`, `{"released":false}`} {
		order := "ORDER-1"
		if i == 0 {
			order = "ORDER-2"
		}
		w := do(t, h, http.MethodPost, releasePath, `{"order_no":"`+order+`"}`, asService...)
		if w.Code != http.StatusOK || strings.TrimSpace(w.Body.String()) != want {
			t.Fatalf("release %d by %s: %d %s, want %s", i+1, order, w.Code, w.Body, want)
		}
	}
}

// TestLockRefusalsOverHTTP: each refusal of the contract is 422
// problem+json with its reason, and the coupon is unchanged.
func TestLockRefusalsOverHTTP(t *testing.T) {
	h, db, _ := newServer(t)
	w := do(t, h, http.MethodPost, "/admin/coupon-templates", `{"name":"10 off 50","discount_amount":1000,"min_order_amount":5000}`, asAdmin...)
	tplID := decode[struct{ ID uint64 }](t, w).ID
	w = do(t, h, http.MethodPost, "/admin/coupons", `{"template_id":`+itoa(tplID)+`,"user_id":42}`, asAdmin...)
	couponID := decode[struct{ ID uint64 }](t, w).ID
	expired := decode[struct{ ID uint64 }](t, do(t, h, http.MethodPost, "/admin/coupons", `{"template_id":`+itoa(tplID)+`,"user_id":42}`, asAdmin...)).ID
	testenv.Must(t, db.Exec("UPDATE coupons SET expires_at = UTC_TIMESTAMP(3) - INTERVAL 1 SECOND WHERE id = ?", expired).Error)
	do(t, h, http.MethodPost, "/internal/coupons/"+itoa(couponID)+"/lock", `{"order_no":"HOLDER","user_id":42,"order_amount":5000}`, asService...)
	free := decode[struct{ ID uint64 }](t, do(t, h, http.MethodPost, "/admin/coupons", `{"template_id":`+itoa(tplID)+`,"user_id":42}`, asAdmin...)).ID

	tests := []struct {
		name   string
		coupon uint64
		body   string
		reason string
	}{
		{"unknown coupon", free + 1000, `{"order_no":"O","user_id":42,"order_amount":5000}`, "not_found"},
		{"another user's coupon", free, `{"order_no":"O","user_id":43,"order_amount":5000}`, "not_owner"},
		{"locked by another order", couponID, `{"order_no":"O","user_id":42,"order_amount":5000}`, "not_available"},
		{"expired", expired, `{"order_no":"O","user_id":42,"order_amount":5000}`, "expired"},
		{"below the minimum", free, `{"order_no":"O","user_id":42,"order_amount":4999}`, "below_minimum"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := do(t, h, http.MethodPost, "/internal/coupons/"+itoa(tt.coupon)+"/lock", tt.body, asService...)
			p := decode[map[string]any](t, w)
			if w.Code != http.StatusUnprocessableEntity || w.Header().Get("Content-Type") != problem.ContentType || p["reason"] != tt.reason {
				t.Fatalf("%d %s, want 422 with reason %s", w.Code, w.Body, tt.reason)
			}
		})
	}
	var locked []uint64
	testenv.Must(t, db.Table("coupons").Where("status = ?", "LOCKED").Pluck("id", &locked).Error)
	if len(locked) != 1 || locked[0] != couponID {
		t.Fatalf("locked coupons %v, want only %d", locked, couponID)
	}
}

// TestConcurrentLockCallsOverHTTP: many orders' lock calls for one coupon
// at once through the whole HTTP stack: exactly one 200, the rest 422
// not_available.
func TestConcurrentLockCallsOverHTTP(t *testing.T) {
	h, _, _ := newServer(t)
	_, couponID := seed(t, h)
	const n = 40
	codes := make([]int, n)
	reasons := make([]any, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			w := do(t, h, http.MethodPost, "/internal/coupons/"+itoa(couponID)+"/lock",
				`{"order_no":"ORDER-`+strconv.Itoa(i)+`","user_id":42,"order_amount":5000}`, asService...)
			codes[i] = w.Code
			if w.Code != http.StatusOK {
				var p map[string]any
				_ = json.Unmarshal(w.Body.Bytes(), &p)
				reasons[i] = p["reason"]
			}
		})
	}
	close(start)
	wg.Wait()
	ok := 0
	for i := range n {
		switch {
		case codes[i] == http.StatusOK:
			ok++
		case codes[i] != http.StatusUnprocessableEntity || reasons[i] != "not_available":
			t.Fatalf("call %d: %d %v, want 200 or 422 not_available", i, codes[i], reasons[i])
		}
	}
	if ok != 1 {
		t.Fatalf("%d lock calls answered 200, want exactly 1", ok)
	}
}

// TestBadInputIsRefusedWithProblemAndWritesNothing: every malformed request
// is answered 4xx in problem+json, and no row is written or changed.
func TestBadInputIsRefusedWithProblemAndWritesNothing(t *testing.T) {
	h, db, _ := newServer(t)
	_, couponID := seed(t, h)
	lock := "/internal/coupons/" + itoa(couponID) + "/lock"
	release := "/internal/coupons/" + itoa(couponID) + "/release"
	tests := []struct {
		name, method, path, body string
		headers                  []string
		status                   int
	}{
		{"issue: not JSON", http.MethodPost, "/admin/coupons", `{"template_id":`, asAdmin, http.StatusBadRequest},
		{"issue: unknown field", http.MethodPost, "/admin/coupons", `{"template_id":1,"user_id":1,"admin":true}`, asAdmin, http.StatusBadRequest},
		{"issue: negative id", http.MethodPost, "/admin/coupons", `{"template_id":-1,"user_id":1}`, asAdmin, http.StatusBadRequest},
		{"issue: missing user", http.MethodPost, "/admin/coupons", `{"template_id":1}`, asAdmin, http.StatusBadRequest},
		{"issue: trailing data", http.MethodPost, "/admin/coupons", `{"template_id":1,"user_id":1} {}`, asAdmin, http.StatusBadRequest},
		{"issue: unknown template", http.MethodPost, "/admin/coupons", `{"template_id":999,"user_id":1}`, asAdmin, http.StatusUnprocessableEntity},
		{"template: no name", http.MethodPost, "/admin/coupon-templates", `{"name":"","discount_amount":100}`, asAdmin, http.StatusBadRequest},
		{"template: zero discount", http.MethodPost, "/admin/coupon-templates", `{"name":"x","discount_amount":0}`, asAdmin, http.StatusBadRequest},
		{"template: validity too long", http.MethodPost, "/admin/coupon-templates", `{"name":"x","discount_amount":1,"valid_days":3651}`, asAdmin, http.StatusBadRequest},
		{"template: negative validity", http.MethodPost, "/admin/coupon-templates", `{"name":"x","discount_amount":1,"valid_days":-1}`, asAdmin, http.StatusBadRequest},
		{"read: non-numeric coupon id", http.MethodGet, "/coupons/abc", "", asUser42, http.StatusBadRequest},
		{"read: zero user id", http.MethodGet, "/users/0/coupons", "", asUser42, http.StatusBadRequest},
		{"read: missing coupon", http.MethodGet, "/coupons/999", "", asUser42, http.StatusNotFound},
		{"lock: not JSON", http.MethodPost, lock, `{"order_no":`, asService, http.StatusBadRequest},
		{"lock: unknown field", http.MethodPost, lock, `{"order_no":"O","user_id":42,"order_amount":5000,"discount_amount":5000}`, asService, http.StatusBadRequest},
		{"lock: no order number", http.MethodPost, lock, `{"user_id":42,"order_amount":5000}`, asService, http.StatusBadRequest},
		{"lock: order number too long", http.MethodPost, lock, `{"order_no":"` + strings.Repeat("x", 65) + `","user_id":42,"order_amount":5000}`, asService, http.StatusBadRequest},
		{"lock: no user", http.MethodPost, lock, `{"order_no":"O","order_amount":5000}`, asService, http.StatusBadRequest},
		{"lock: negative user", http.MethodPost, lock, `{"order_no":"O","user_id":-42,"order_amount":5000}`, asService, http.StatusBadRequest},
		{"lock: no amount", http.MethodPost, lock, `{"order_no":"O","user_id":42}`, asService, http.StatusBadRequest},
		{"lock: negative amount", http.MethodPost, lock, `{"order_no":"O","user_id":42,"order_amount":-1}`, asService, http.StatusBadRequest},
		{"lock: amount as text", http.MethodPost, lock, `{"order_no":"O","user_id":42,"order_amount":"5000"}`, asService, http.StatusBadRequest},
		{"lock: non-numeric coupon id", http.MethodPost, "/internal/coupons/abc/lock", `{"order_no":"O","user_id":42,"order_amount":5000}`, asService, http.StatusBadRequest},
		{"release: no order number", http.MethodPost, release, `{}`, asService, http.StatusBadRequest},
		{"release: unknown field", http.MethodPost, release, `{"order_no":"O","force":true}`, asService, http.StatusBadRequest},
		{"release: zero coupon id", http.MethodPost, "/internal/coupons/0/release", `{"order_no":"O"}`, asService, http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := do(t, h, tt.method, tt.path, tt.body, tt.headers...)
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
	if n := count(t, db, "coupon_template"); n != 1 {
		t.Fatalf("%d templates after refused requests, want the seeded one", n)
	}
	if n := count(t, db, "coupons"); n != 1 {
		t.Fatalf("%d coupons after refused requests, want the seeded one", n)
	}
	var version uint32
	testenv.Must(t, db.Table("coupons").Where("id = ?", couponID).Pluck("version", &version).Error)
	if version != 0 {
		t.Fatalf("the seeded coupon changed (version %d)", version)
	}
}

func TestReconcileNeedsTheAdminTokenAndListsAnomalies(t *testing.T) {
	h, db, svc := newServer(t)
	a := svc.App
	if w := do(t, h, http.MethodGet, "/admin/reconcile", ""); w.Code != http.StatusUnauthorized {
		t.Fatalf("no token: %d", w.Code)
	}
	if w := do(t, h, http.MethodGet, "/admin/reconcile", "", "Authorization", "Bearer wrong"); w.Code != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", w.Code)
	}
	w := do(t, h, http.MethodGet, "/admin/reconcile", "", asAdmin...)
	if w.Code != http.StatusOK || strings.TrimSpace(w.Body.String()) != `{"anomalies":[]}` {
		t.Fatalf("clean: %d %s", w.Code, w.Body)
	}

	// A coupon marked USED with no ledger row behind it, and a paid order
	// whose coupon's lock was released before its payment landed.
	tpl, err := a.CreateTemplate(ctx, coupon.Template{Name: "x", DiscountAmount: 1})
	testenv.Must(t, err)
	c, err := a.IssueCoupon(ctx, tpl.ID, 1)
	testenv.Must(t, err)
	testenv.Must(t, db.Exec("UPDATE coupons SET status = 'USED', used_order_no = 'LOST' WHERE id = ?", c.ID).Error)
	released, err := a.IssueCoupon(ctx, tpl.ID, 1)
	testenv.Must(t, err)
	testenv.Must(t, svc.Store.InTx(ctx, func(tx coupon.Tx) error {
		return a.LandOrderPaid(ctx, tx, app.OrderPaid{MessageID: "m1", OrderNo: "PAID", UserID: 1, CouponID: released.ID})
	}))
	if r, err := a.ProcessDueMessages(ctx); err != nil || r.Failed != 1 {
		t.Fatalf("deduct the unlocked coupon: %+v, %v", r, err)
	}
	w = do(t, h, http.MethodGet, "/admin/reconcile", "", asAdmin...)
	want := `{"anomalies":[{"kind":"used_coupon_without_deduction","order_no":"LOST","coupon_id":` + itoa(c.ID) + `},` +
		`{"kind":"paid_order_coupon_not_locked","order_no":"PAID","coupon_id":` + itoa(released.ID) + `,"reason":"not_locked_by_order"}]}`
	if w.Code != http.StatusOK || strings.TrimSpace(w.Body.String()) != want {
		t.Fatalf("anomalies: %d %s, want %s", w.Code, w.Body, want)
	}
}

// TestGuardedRoutesWithoutAGuardRefuseEverything: an API built without
// Options.Admin or Options.Internal fails closed.
func TestGuardedRoutesWithoutAGuardRefuseEverything(t *testing.T) {
	h, _, svc := newServer(t)
	_, couponID := seed(t, h)
	open := gin.New()
	api, err := httpapi.New(svc.App, httpapi.Options{Log: testenv.Logger(t)})
	testenv.Must(t, err)
	api.Register(open)
	e := spec.Handler(t, open)
	if w := do(t, e, http.MethodGet, "/admin/reconcile", "", asAdmin...); w.Code != http.StatusForbidden {
		t.Fatalf("reconcile without a guard: %d %s, want 403", w.Code, w.Body)
	}
	if w := do(t, e, http.MethodPost, "/internal/coupons/"+itoa(couponID)+"/lock", `{"order_no":"O","user_id":42,"order_amount":5000}`, asService...); w.Code != http.StatusForbidden {
		t.Fatalf("lock without a guard: %d %s, want 403", w.Code, w.Body)
	}
}
