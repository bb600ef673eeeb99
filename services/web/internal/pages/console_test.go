package pages_test

import (
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/web/internal/pages"
	"github.com/oncemall/oncemall/services/web/internal/upstream"
)

// newConsole is newShop with the console, and a section of its own at
// /console/extra as the lab adds one.
func newConsole(t *testing.T) *shop {
	t.Helper()
	extra := pages.Section{Name: "Extra", Path: "/extra",
		Templates: fstest.MapFS{"extra.html": {Data: []byte(`{{define "content"}}{{template "console-menu" .}}<p id="extra">{{.Said}}</p>{{end}}`)}},
		Routes: func(g gin.IRouter, k pages.Kit) {
			g.GET("", func(c *gin.Context) {
				k.Render(c, http.StatusOK, "extra", map[string]any{"Said": "extra for user " + strconv.FormatUint(k.Caller(c).UserID, 10)})
			})
			g.POST("", k.Form(), func(c *gin.Context) { c.Status(http.StatusNoContent) })
		}}
	return newShopWith(t, func(o *pages.Options, client *upstream.Client) {
		o.Operator, o.Sections = client, []pages.Section{extra}
	})
}

func get(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(u)
	testenv.Must(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

// TestConsoleIsForOperatorsOnly: without a session the console's pages go
// to sign-in; a customer's session gets 403 on every page and form, with
// its CSRF token or not; an operator's gets the pages, a section's too.
func TestConsoleIsForOperatorsOnly(t *testing.T) {
	s := newConsole(t)
	paths := []string{"/console", "/console/products", "/console/coupons", "/console/extra"}
	for _, p := range paths {
		resp, _ := get(t, s.browser(t, ""), s.URL+p)
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/signin?next=") {
			t.Errorf("GET %s signed out: %d to %q, want 303 to sign-in", p, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	customer := s.browser(t, s.iss.Token(t, 42, auth.RoleCustomer))
	token := s.csrf(t, customer, "/signin")
	for _, p := range paths {
		resp, body := get(t, customer, s.URL+p)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "Operators only") {
			t.Errorf("GET %s as a customer: %d, want 403 Operators only", p, resp.StatusCode)
		}
	}
	for _, p := range []string{"/console/products", "/console/products/1/stock", "/console/coupon-templates", "/console/coupons", "/console/extra"} {
		resp, _ := post(t, customer, s.URL+p, url.Values{"csrf": {token}, "name": {"x"}, "model": {"y"}, "price": {"1"}})
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST %s as a customer: %d, want 403", p, resp.StatusCode)
		}
	}
	if _, body := get(t, customer, s.URL+"/"); strings.Contains(body, `id="nav-console"`) {
		t.Error("a customer's pages link to the console")
	}

	op := s.browser(t, s.iss.Token(t, 7, auth.RoleOperator))
	resp, body := get(t, op, s.URL+"/console/extra")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `<p id="extra">extra for user 7</p>`) ||
		!strings.Contains(body, `href="/console/extra">Extra</a>`) || !strings.Contains(body, `id="nav-console"`) {
		t.Errorf("GET /console/extra as the operator: %d\n%s", resp.StatusCode, body)
	}
	// The services are down: each reconciler is shown as not asked, the
	// page still answers.
	resp, body = get(t, op, s.URL+"/console")
	if resp.StatusCode != http.StatusOK || strings.Count(body, "The reconciler could not be asked") != 3 {
		t.Errorf("GET /console as the operator with the services down: %d\n%s", resp.StatusCode, body)
	}
}

// TestConsoleFormsCheckWhatTheySend: a form of the console without its
// CSRF token is 403; one with a value the services would refuse is 400
// before any call; a good one reaches the (down) service and its error
// page's "Try again" sends the same form.
func TestConsoleFormsCheckWhatTheySend(t *testing.T) {
	s := newConsole(t)
	op := s.browser(t, s.iss.Token(t, 7, auth.RoleOperator))
	token := s.csrf(t, op, "/console/products")
	if resp, _ := post(t, op, s.URL+"/console/extra", url.Values{}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a section's form without a CSRF token: %d, want 403", resp.StatusCode)
	}
	for name, c := range map[string]struct {
		path string
		form url.Values
	}{
		"price with three decimals": {"/console/products", url.Values{"name": {"Lamp"}, "model": {"L1"}, "price": {"1.234"}}},
		"negative stock":            {"/console/products", url.Values{"name": {"Lamp"}, "model": {"L1"}, "price": {"12.50"}, "stock": {"-1"}}},
		"no name":                   {"/console/products", url.Values{"model": {"L1"}, "price": {"12.50"}}},
		"stock not a number":        {"/console/products/3/stock", url.Values{"available": {"many"}}},
		"template without discount": {"/console/coupon-templates", url.Values{"name": {"5 off"}}},
		"coupon for no user":        {"/console/coupons", url.Values{"template_id": {"3"}}},
	} {
		c.form.Set("csrf", token)
		if resp, _ := post(t, op, s.URL+c.path, c.form); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", name, resp.StatusCode)
		}
	}
	resp, body := post(t, op, s.URL+"/console/products", url.Values{"csrf": {token}, "name": {"Lamp"}, "model": {"L1"}, "price": {"12.5"}, "stock": {"3"}})
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "The order service did not answer") ||
		!strings.Contains(body, `name="price" value="12.5"`) {
		t.Errorf("create a product with the order service down: %d\n%s", resp.StatusCode, body)
	}
}
