package assembly_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/coupon/internal/assembly"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
	"github.com/oncemall/oncemall/services/coupon/internal/coupontest"
)

// notAsked is the sweeper's order service; these requests never sweep.
type notAsked struct{}

func (notAsked) OrderState(context.Context, string) (coupon.OrderState, error) {
	return "", coupon.ErrOrderServiceUnavailable
}

// TestRoutesRequireAVerifiedToken runs the service as Assemble builds it:
// a forged, an expired or another audience's token, or a bare X-User-ID,
// is 401 problem+json on the customer's routes and the operator's; a
// customer's token at /admin is 403; none of them issues a coupon or makes
// a template. The owner's token reads the coupon, an operator's token
// issues one.
func TestRoutesRequireAVerifiedToken(t *testing.T) {
	svc := coupontest.Start(t, nil, assembly.Options{Orders: notAsked{}})
	iss := svc.Issuer
	ctx := context.Background()
	tpl, err := svc.App.CreateTemplate(ctx, coupon.Template{Name: "10 off", DiscountAmount: 1000})
	testenv.Must(t, err)
	cp, err := svc.App.IssueCoupon(ctx, tpl.ID, 42)
	testenv.Must(t, err)
	issue := fmt.Sprintf(`{"template_id":%d,"user_id":42}`, tpl.ID)
	counts := func() string {
		return fmt.Sprint(svc.Count(t, "coupons", "1 = 1"), svc.Count(t, "coupon_template", "1 = 1"))
	}
	before := counts()
	refused := map[string]map[string]string{
		"X-User-ID only": {auth.UserIDHeader: "42"},
		"forged":         {"Authorization": "Bearer " + iss.Forged(t, 42, auth.RoleOperator)},
		"expired":        {"Authorization": "Bearer " + iss.Expired(t, 42, auth.RoleOperator)},
		"other audience": {"Authorization": "Bearer " + iss.ForAudience(t, "payment-admin", 42, auth.RoleOperator)},
		"algorithm none": {"Authorization": "Bearer " + iss.Unsigned(t, 42, auth.RoleOperator)},
	}
	routes := []struct{ method, path, body string }{
		{http.MethodGet, fmt.Sprintf("/coupons/%d", cp.ID), ""},
		{http.MethodGet, "/users/42/coupons", ""},
		{http.MethodPost, "/admin/coupons", issue},
		{http.MethodPost, "/admin/coupon-templates", `{"name":"x","discount_amount":1}`},
	}
	for name, headers := range refused {
		for _, r := range routes {
			if status, ct, body := testenv.Send(t, r.method, svc.URL+r.path, headers, r.body); status != http.StatusUnauthorized || ct != problem.ContentType {
				t.Errorf("%s: %s %s: %d %s %s, want 401 problem+json", name, r.method, r.path, status, ct, body)
			}
		}
	}
	customer := map[string]string{"Authorization": "Bearer " + iss.Token(t, 42, auth.RoleCustomer)}
	if status, ct, body := testenv.Send(t, http.MethodPost, svc.URL+"/admin/coupons", customer, issue); status != http.StatusForbidden || ct != problem.ContentType {
		t.Errorf("a customer's token at /admin: %d %s %s, want 403 problem+json", status, ct, body)
	}
	if after := counts(); after != before {
		t.Fatalf("refused requests changed coupons and templates: %s, was %s", after, before)
	}

	if status, _, body := testenv.Send(t, http.MethodGet, fmt.Sprintf("%s/coupons/%d", svc.URL, cp.ID), customer, ""); status != http.StatusOK || !strings.Contains(body, `"user_id":42`) {
		t.Fatalf("the owner reads the coupon: %d %s", status, body)
	}
	other := map[string]string{"Authorization": "Bearer " + iss.Token(t, 43, auth.RoleCustomer)}
	if status, _, body := testenv.Send(t, http.MethodGet, fmt.Sprintf("%s/coupons/%d", svc.URL, cp.ID), other, ""); status != http.StatusNotFound {
		t.Fatalf("another user reads the coupon: %d %s, want 404", status, body)
	}
	operator := map[string]string{"Authorization": "Bearer " + iss.Token(t, 1, auth.RoleOperator)}
	if status, _, body := testenv.Send(t, http.MethodPost, svc.URL+"/admin/coupons", operator, issue); status != http.StatusCreated {
		t.Fatalf("an operator issues a coupon: %d %s", status, body)
	}
	if n := svc.Count(t, "coupons", "user_id = ?", 42); n != 2 {
		t.Fatalf("%d coupons of user 42, want 2", n)
	}
}
