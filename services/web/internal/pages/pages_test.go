package pages_test

import (
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/testkit/authtest"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/web/internal/pages"
	"github.com/oncemall/oncemall/services/web/internal/upstream"
)

// shop is the storefront over a real verifier of a test issuer's tokens and
// a real client of services that are down (nothing listens at their
// address): what the storefront itself decides is all that answers.
type shop struct {
	*httptest.Server
	iss *authtest.Issuer
}

func newShop(t *testing.T) *shop { return newShopWith(t, nil) }

// newShopWith is newShop with more of the pages' options set by more (the
// operator's client is the shop's own client of the down services).
func newShopWith(t *testing.T, more func(o *pages.Options, client *upstream.Client)) *shop {
	t.Helper()
	iss := authtest.New(t)
	v, err := auth.NewVerifier(iss.Config(), auth.Options{})
	testenv.Must(t, err)
	down := "http://" + closedAddr(t)
	client, err := upstream.New(upstream.URLs{Identity: down, Order: down, Coupon: down, Payment: down, PSP: down},
		&http.Client{Timeout: 2 * time.Second}, nil)
	testenv.Must(t, err)
	o := pages.Options{Log: testenv.Logger(t), Brand: "demo", CookieKey: []byte("test-cookie-key-0123456789")}
	if more != nil {
		more(&o, client)
	}
	p, err := pages.New(client, v, o)
	testenv.Must(t, err)
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	p.Register(e)
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return &shop{Server: srv, iss: iss}
}

// closedAddr is an address nothing listens on.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	testenv.Must(t, err)
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// browser is a client with a cookie jar that does not follow redirects.
func (s *shop) browser(t *testing.T, session string) *http.Client {
	jar, err := cookiejar.New(nil)
	testenv.Must(t, err)
	if session != "" {
		u, _ := url.Parse(s.URL)
		jar.SetCookies(u, []*http.Cookie{{Name: "oncemall_session", Value: session, Path: "/"}})
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads a page and returns the CSRF token of its forms.
func (s *shop) csrf(t *testing.T, c *http.Client, path string) string {
	t.Helper()
	resp, err := c.Get(s.URL + path)
	testenv.Must(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfField.FindSubmatch(body)
	if m == nil {
		t.Fatalf("GET %s: %d, no CSRF field in\n%s", path, resp.StatusCode, body)
	}
	return string(m[1])
}

func post(t *testing.T, c *http.Client, u string, form url.Values) (*http.Response, string) {
	t.Helper()
	resp, err := c.PostForm(u, form)
	testenv.Must(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

func cookie(resp *http.Response, name string) (*http.Cookie, bool) {
	for _, c := range resp.Cookies() {
		if c.Name == name {
			return c, true
		}
	}
	return nil, false
}

// TestFormsNeedTheBrowsersCSRFToken: a form without the token, with another
// browser's, or with a made-up one is 403 and changes nothing; with its
// page's token it goes through.
func TestFormsNeedTheBrowsersCSRFToken(t *testing.T) {
	s := newShop(t)
	mine, other := s.browser(t, ""), s.browser(t, "")
	token := s.csrf(t, mine, "/signin")
	otherToken := s.csrf(t, other, "/signin")
	for name, tok := range map[string]string{"none": "", "another browser's": otherToken, "made up": strings.Repeat("A", len(token))} {
		resp, body := post(t, mine, s.URL+"/cart/add", url.Values{"csrf": {tok}, "product_id": {"1"}, "quantity": {"2"}})
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "This form has expired") {
			t.Errorf("%s token: %d, want 403 and the error page", name, resp.StatusCode)
		}
		if _, set := cookie(resp, "oncemall_cart"); set {
			t.Errorf("%s token: the cart changed", name)
		}
	}
	resp, _ := post(t, mine, s.URL+"/cart/add", url.Values{"csrf": {token}, "product_id": {"1"}, "quantity": {"2"}})
	c, set := cookie(resp, "oncemall_cart")
	if resp.StatusCode != http.StatusSeeOther || !set || c.Value != "1-2" || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
		t.Errorf("the page's own token: %d, cart cookie %+v, want 303 and 1-2, HttpOnly, SameSite=Strict", resp.StatusCode, c)
	}
}

// TestSessionNeedsAVerifiedToken: a session cookie whose token is forged,
// expired, for another audience, tampered with or unsigned is no session:
// a page goes to sign-in, the JSON is 401 problem+json, and the cookie is
// dropped. A good token gets through to the services.
func TestSessionNeedsAVerifiedToken(t *testing.T) {
	s := newShop(t)
	bad := map[string]string{
		"forged":         s.iss.Forged(t, 42, auth.RoleCustomer),
		"expired":        s.iss.Expired(t, 42, auth.RoleCustomer),
		"other audience": s.iss.ForAudience(t, "payment-admin", 42, auth.RoleCustomer),
		"tampered":       s.iss.Tampered(t, 42, auth.RoleCustomer),
		"unsigned":       s.iss.Unsigned(t, 42, auth.RoleCustomer),
		"not a token":    "42",
	}
	for name, tok := range bad {
		c := s.browser(t, tok)
		resp, err := c.Get(s.URL + "/orders")
		testenv.Must(t, err)
		resp.Body.Close()
		gone, _ := cookie(resp, "oncemall_session")
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/signin?next=%2Forders" || gone == nil || gone.MaxAge >= 0 {
			t.Errorf("%s: GET /orders %d to %q, session cookie %+v; want 303 to sign-in and the cookie dropped",
				name, resp.StatusCode, resp.Header.Get("Location"), gone)
		}
		resp, err = c.Get(s.URL + "/api/orders/O1")
		testenv.Must(t, err)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: GET /api/orders/O1 %d %s, want 401 problem+json", name, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
	// A good token passes the storefront and reaches the (down) order
	// service: the answer is the error page of a service that did not
	// answer, not a sign-in.
	resp, err := s.browser(t, s.iss.Token(t, 42, auth.RoleCustomer)).Get(s.URL + "/orders/O1")
	testenv.Must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("good token: GET /orders/O1 %d, want 502 from the order service being down", resp.StatusCode)
	}
}

// TestAFailedOrderKeepsTheClick: placing an order while the order service
// is down is a readable 502 page whose "Try again" posts the same form
// again, Idempotency-Key and items included.
func TestAFailedOrderKeepsTheClick(t *testing.T) {
	s := newShop(t)
	c := s.browser(t, s.iss.Token(t, 42, auth.RoleCustomer))
	token := s.csrf(t, c, "/signin")
	key := "web-0123456789abcdef0123456789abcdef"
	resp, body := post(t, c, s.URL+"/checkout", url.Values{"csrf": {token}, "key": {key}, "item": {"3-2", "5-1"}, "coupon_id": {"7"}})
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "The order service did not answer") {
		t.Fatalf("checkout with the order service down: %d\n%s", resp.StatusCode, body)
	}
	for _, want := range []string{`action="/checkout"`, `name="key" value="` + key + `"`, `name="item" value="3-2"`,
		`name="item" value="5-1"`, `name="coupon_id" value="7"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the error page's Try again form lacks %s", want)
		}
	}
	for name, form := range map[string]url.Values{
		"no key":       {"csrf": {token}, "item": {"3-2"}},
		"no items":     {"csrf": {token}, "key": {key}},
		"bad quantity": {"csrf": {token}, "key": {key}, "item": {"3-0"}},
		"bad coupon":   {"csrf": {token}, "key": {key}, "item": {"3-1"}, "coupon_id": {"x"}},
	} {
		if resp, _ := post(t, c, s.URL+"/checkout", form); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", name, resp.StatusCode)
		}
	}
}

// TestSignInGoesBackToThisSiteOnly: the page after signing in is a path of
// the storefront, never another site.
func TestSignInGoesBackToThisSiteOnly(t *testing.T) {
	s := newShop(t)
	for next, want := range map[string]string{"/orders": "/orders", "//evil.example/": "/", "https://evil.example/": "/", `/\evil.example`: "/", "": "/"} {
		resp, err := s.browser(t, "").Get(s.URL + "/signin?next=" + url.QueryEscape(next))
		testenv.Must(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), `name="next" value="`+want+`"`) {
			t.Errorf("next=%q: the form goes back to something other than %q", next, want)
		}
	}
}
