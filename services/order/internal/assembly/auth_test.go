package assembly_test

import (
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/pkg/testkit/idempotencytest"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/order/internal/assembly"
	"github.com/oncemall/oncemall/services/order/internal/order"
	"github.com/oncemall/oncemall/services/order/internal/ordertest"
)

// TestCustomerRoutesRequireAVerifiedToken runs the service as Assemble
// builds it and sends every customer route, and an operator route, a
// forged, an expired and another audience's token, a customer's token
// where an operator's is needed, and a bare X-User-ID: each is 401 (403
// for the customer at /admin) problem+json, and no order, item,
// reservation, idempotency record, product, stock or order status
// changed. The owner's own token then does what the others could not.
func TestCustomerRoutesRequireAVerifiedToken(t *testing.T) {
	env := ordertest.Start(t, nil, assembly.Options{})
	kettle := env.Product(t, "Kettle", 1500, 10)
	placed := env.PlaceOrder(t, 42, order.Line{ProductID: kettle, Quantity: 1})
	iss := env.Issuer
	body := fmt.Sprintf(`{"items":[{"product_id":%d,"quantity":2}]}`, kettle)
	counts := func() string {
		return fmt.Sprint(env.Count(t, "SELECT COUNT(*) FROM orders"), env.Count(t, "SELECT COUNT(*) FROM order_items"),
			env.Count(t, "SELECT COUNT(*) FROM stock_reservation"), env.Count(t, "SELECT COUNT(*) FROM idempotency_record"),
			env.Count(t, "SELECT COUNT(*) FROM products"), env.Stock(t, kettle), env.Status(t, placed.No))
	}
	before := counts()
	refused := map[string]map[string]string{
		"X-User-ID only":     {auth.UserIDHeader: "42"},
		"forged":             {"Authorization": "Bearer " + iss.Forged(t, 42, auth.RoleCustomer)},
		"expired":            {"Authorization": "Bearer " + iss.Expired(t, 42, auth.RoleCustomer)},
		"other audience":     {"Authorization": "Bearer " + iss.ForAudience(t, "payment-admin", 42, auth.RoleCustomer)},
		"tampered":           {"Authorization": "Bearer " + iss.Tampered(t, 42, auth.RoleCustomer)},
		"the admin token":    {"Authorization": "Bearer " + ordertest.AdminToken},
		"forged + X-User-ID": {"Authorization": "Bearer " + iss.Forged(t, 42), auth.UserIDHeader: "42"},
	}
	routes := []struct{ method, path, body string }{
		{http.MethodPost, "/orders", body},
		{http.MethodGet, "/orders/" + placed.No, ""},
		{http.MethodPost, "/orders/" + placed.No + "/cancel", ""},
		{http.MethodGet, "/orders/token", ""},
	}
	for name, headers := range refused {
		for _, r := range routes {
			status, ct, got := send(t, r.method, env.URL+r.path, headers, r.body)
			if status != http.StatusUnauthorized || ct != problem.ContentType {
				t.Errorf("%s: %s %s: %d %s %s, want 401 problem+json", name, r.method, r.path, status, ct, got)
			}
		}
	}
	customer := map[string]string{"Authorization": "Bearer " + iss.Token(t, 42, auth.RoleCustomer)}
	if status, ct, got := send(t, http.MethodPost, env.URL+"/admin/products", customer, `{"brand":"b","name":"n","model":"m","price":1}`); status != http.StatusForbidden || ct != problem.ContentType {
		t.Errorf("a customer's token at /admin: %d %s %s, want 403 problem+json", status, ct, got)
	}
	if after := counts(); after != before {
		t.Fatalf("refused requests changed the service: %s, was %s", after, before)
	}

	// The owner's token, and an operator's at /admin, are served.
	if status, _, got := send(t, http.MethodPost, env.URL+"/orders", customer, body); status != http.StatusCreated || !strings.Contains(got, `"user_id":42`) {
		t.Fatalf("the owner's POST /orders: %d %s", status, got)
	}
	if status, _, got := send(t, http.MethodPost, env.URL+"/orders/"+placed.No+"/cancel", customer, ""); status != http.StatusOK {
		t.Fatalf("the owner's cancel: %d %s", status, got)
	}
	operator := map[string]string{"Authorization": "Bearer " + iss.Token(t, 1, auth.RoleOperator)}
	if status, _, got := send(t, http.MethodPost, env.URL+"/admin/products", operator, `{"brand":"b","name":"n","model":"m","price":1}`); status != http.StatusCreated {
		t.Fatalf("an operator's POST /admin/products: %d %s", status, got)
	}
	if n := env.Count(t, "SELECT COUNT(*) FROM orders WHERE user_id = 42"); n != 2 {
		t.Fatalf("%d orders of user 42, want 2", n)
	}
}

// send is testenv.Send with a fresh Idempotency-Key on POST /orders,
// which the route requires before it looks at the token.
func send(t *testing.T, method, url string, headers map[string]string, body string) (int, string, string) {
	t.Helper()
	if method == http.MethodPost && strings.HasSuffix(url, "/orders") {
		headers = maps.Clone(headers)
		headers["Idempotency-Key"] = idempotencytest.NewKey()
	}
	return testenv.Send(t, method, url, headers, body)
}
