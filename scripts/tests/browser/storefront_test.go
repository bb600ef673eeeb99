// Package browser_test drives the storefront (services/web) in a real
// browser, Debian's chromium headless through chromedp, against the whole
// shop run as processes on the real MariaDB, Redis and NATS, and counts
// what the clicks made in the services' databases.
package browser_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/oncemall/oncemall/pkg/auth"
)

// TestStorefront: alice signs in, buys two products with a coupon, paying
// through the platform's page; "Place order" and "Pay" each submitted three
// times (two at once, then a click) make one order and one payment; the
// order turns PAID and the coupon USED on the page without a reload. An
// unpaid order cancelled gives its stock and its coupon back. A forged
// session cookie is refused.
func TestStorefront(t *testing.T) {
	r := startRig(t)
	kettle := r.newProduct(t, "Kettle", 1500, 10)
	teapot := r.newProduct(t, "Teapot", 800, 10)
	buyCoupon := r.newCoupon(t, alice, 500, 1000)
	cancelCoupon := r.newCoupon(t, alice, 300, 1000)

	b := newBrowser(t, r.web.URL(""))
	b.run(t, "sign in as alice", b.signIn("alice", "alice-dev-password"))
	var who string
	b.run(t, "whoami", chromedp.Text(`#whoami`, &who, chromedp.ByQuery))
	if who != "alice" {
		t.Fatalf("signed in as %q, want alice", who)
	}
	b.run(t, "catalog", chromedp.Navigate(b.base+"/"), chromedp.WaitVisible(`[data-product]`, chromedp.ByQuery))
	b.shot(t, "storefront-catalog")

	// Buy one kettle and two teapots with the 5.00 coupon: 31.00 - 5.00.
	b.run(t, "add to cart", addToCart(b.base, kettle, 1), addToCart(b.base, teapot, 2),
		chromedp.SetValue(`#coupon`, strconv.FormatUint(buyCoupon, 10), chromedp.ByQuery))
	b.shot(t, "storefront-cart")
	orderURLs := b.submitThrice(t, "place order", "checkout", "#place-order")
	var orderNo, discount, pay string
	b.run(t, "order page", chromedp.WaitVisible(`#order-no`, chromedp.ByQuery), chromedp.Text(`#order-no`, &orderNo, chromedp.ByQuery),
		chromedp.Text(`#discount`, &discount, chromedp.ByQuery), chromedp.Text(`#pay-amount`, &pay, chromedp.ByQuery))
	for _, u := range orderURLs {
		if !strings.HasSuffix(u, "/orders/"+orderNo) {
			t.Errorf("a submit of the order form ended at %s, not at order %s", u, orderNo)
		}
	}
	if discount != "-5.00" || pay != "26.00" {
		t.Errorf("order %s shows discount %q and pay %q, want -5.00 and 26.00", orderNo, discount, pay)
	}
	if n := count(t, r.order.db, "SELECT COUNT(*) FROM orders WHERE user_id = ?", alice); n != 1 {
		t.Fatalf("three submits of one order form made %d orders, want 1", n)
	}

	// Pay, three submits of one form: one payment, one charge; the
	// platform's page, then back to the order, which turns PAID and its
	// coupon USED while the page stays open.
	payURLs := b.submitThrice(t, "pay", "pay", "#pay-button")
	var tradeStatus string
	b.run(t, "platform page", chromedp.WaitVisible(`#trade-status`, chromedp.ByQuery), chromedp.Text(`#trade-status`, &tradeStatus, chromedp.ByQuery))
	if tradeStatus != "PAID" {
		t.Errorf("the platform says %q about the charge, want PAID", tradeStatus)
	}
	for _, u := range payURLs {
		if !strings.Contains(u, "/platform/") {
			t.Errorf("a submit of the pay form ended at %s, not at the platform's page", u)
		}
	}
	b.shot(t, "storefront-platform")
	b.run(t, "return to the shop", chromedp.Click(`#return`, chromedp.ByQuery),
		chromedp.WaitVisible(`#order-status[data-status="PAID"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#coupon-status[data-status="USED"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#payment-status[data-status="PAID"]`, chromedp.ByQuery))
	b.shot(t, "storefront-order-paid")
	for what, q := range map[string]string{
		"payments":             "SELECT COUNT(*) FROM payments WHERE order_no = ?",
		"payment transactions": "SELECT COUNT(*) FROM payment_transaction t JOIN payments p ON p.platform_serial = t.platform_serial WHERE p.order_no = ?",
	} {
		if n := count(t, r.payment.db, q, orderNo); n != 1 {
			t.Errorf("three submits of one pay form: %d %s, want 1", n, what)
		}
	}
	if got := r.stock(t, kettle); got != 9 {
		t.Errorf("kettles after the purchase: %d, want 9", got)
	}
	if got := r.couponStatus(t, buyCoupon); got != "USED" {
		t.Errorf("coupon %d: %s in its database, want USED", buyCoupon, got)
	}

	// An unpaid order, cancelled: its stock and its coupon come back.
	b.run(t, "second order", addToCart(b.base, kettle, 2),
		chromedp.SetValue(`#coupon`, strconv.FormatUint(cancelCoupon, 10), chromedp.ByQuery),
		chromedp.Click(`#place-order`, chromedp.ByQuery), chromedp.WaitVisible(`#cancel-button`, chromedp.ByQuery))
	if got := r.stock(t, kettle); got != 7 {
		t.Fatalf("kettles with two ordered: %d, want 7", got)
	}
	b.run(t, "cancel", chromedp.Click(`#cancel-button`, chromedp.ByQuery),
		chromedp.WaitVisible(`#order-status[data-status="CANCELLED"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#coupon-status[data-status="UNUSED"]`, chromedp.ByQuery))
	var stock string
	b.run(t, "catalog after the cancel", chromedp.Navigate(b.base+"/"),
		chromedp.AttributeValue(fmt.Sprintf(`[data-product="%d"] .stock`, kettle), "data-stock", &stock, nil, chromedp.ByQuery))
	if stock != "9" || r.stock(t, kettle) != 9 {
		t.Errorf("kettles after the cancel: the catalog says %s, the database %d, want 9", stock, r.stock(t, kettle))
	}
	if got := r.couponStatus(t, cancelCoupon); got != "UNUSED" {
		t.Errorf("coupon %d after the cancel: %s, want UNUSED", cancelCoupon, got)
	}
	// An order alice placed elsewhere (the API, another browser) is on
	// her orders page too: the page lists her orders, not this browser's.
	elsewhere := r.placeOrder(t, "alice", "alice-dev-password", teapot, 1)
	b.run(t, "orders page", chromedp.Navigate(b.base+"/orders"),
		chromedp.WaitVisible(`[data-status="CANCELLED"]`, chromedp.ByQuery), chromedp.WaitVisible(`[data-status="PAID"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`[data-poll="/api/orders/`+elsewhere+`"]`, chromedp.ByQuery))
	b.shot(t, "storefront-orders")
	if n := count(t, r.order.db, "SELECT COUNT(*) FROM orders WHERE user_id = ?", alice); n != 3 {
		t.Errorf("alice has %d orders, want 3", n)
	}

	// A token signed by a key identity never published, naming alice: the
	// storefront refuses it, drops the cookie and asks to sign in.
	forged := forgedToken(t, r.identity.URL(""), alice)
	host, _, _ := strings.Cut(strings.TrimPrefix(b.base, "http://"), ":")
	var loc string
	b.run(t, "forged session", chromedp.ActionFunc(func(ctx context.Context) error {
		return network.DeleteCookies("oncemall_session").WithDomain(host).Do(ctx)
	}), chromedp.ActionFunc(func(ctx context.Context) error {
		return network.SetCookie("oncemall_session", forged).WithDomain(host).WithPath("/").WithHTTPOnly(true).Do(ctx)
	}), chromedp.Navigate(b.base+"/orders"), chromedp.WaitVisible(`#signin`, chromedp.ByQuery), chromedp.Location(&loc))
	if u, _ := url.Parse(loc); u == nil || u.Path != "/signin" {
		t.Errorf("with a forged session the orders page went to %s, want the sign-in page", loc)
	}
	req, _ := http.NewRequest("GET", r.web.URL("/api/orders/"+orderNo), nil)
	req.AddCookie(&http.Cookie{Name: "oncemall_session", Value: forged})
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("the order's JSON with a forged session: %d %s, want 401 problem+json", resp.StatusCode, resp.Header.Get("Content-Type"))
	}

	// A form posted without this browser's CSRF token changes nothing.
	resp, err = client.PostForm(r.web.URL("/cart/add"), url.Values{"product_id": {strconv.FormatUint(kettle, 10)}, "quantity": {"1"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == "oncemall_cart" {
			t.Errorf("a form without a CSRF token changed the cart: %s", c)
		}
	}
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a form without a CSRF token: %d, want 403", resp.StatusCode)
	}
}

// browser is a headless chromium tab on the storefront at base.
type browser struct {
	ctx  context.Context
	base string
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1100, 800))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first Run starts the browser, on the tab's own context: a
	// deadline on it would close the browser when it passed.
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("start %s: %v", chromium, err)
	}
	return &browser{ctx: ctx, base: base}
}

// run runs actions within the test's deadline.
func (b *browser) run(t *testing.T, what string, actions ...chromedp.Action) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, deadline)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		var loc, body string
		_ = chromedp.Run(b.ctx, chromedp.Location(&loc), chromedp.Text(`body`, &body, chromedp.ByQuery))
		t.Fatalf("%s: %v\nthe page at %s says:\n%s", what, err, loc, body)
	}
}

// submitThrice submits the form with id form twice at once, as a double
// click does, then clicks its button, and returns where each of the two
// concurrent submits ended: every submit carries the Idempotency-Key the
// form was rendered with.
func (b *browser) submitThrice(t *testing.T, what, form, button string) []string {
	t.Helper()
	js := `(async () => {
		const f = document.getElementById(` + strconv.Quote(form) + `);
		const body = new URLSearchParams(new FormData(f));
		const rs = await Promise.all([1, 2].map(() => fetch(f.action, {method: "POST", body})));
		return rs.map(r => r.status + " " + r.url);
	})()`
	var got []string
	b.run(t, what+": two at once", chromedp.Evaluate(js, &got, func(p *runtime.EvaluateParams) *runtime.EvaluateParams {
		return p.WithAwaitPromise(true)
	}))
	urls := make([]string, len(got))
	for i, g := range got {
		status, u, _ := strings.Cut(g, " ")
		if status != "200" {
			t.Errorf("%s: a concurrent submit ended %s at %s, want 200", what, status, u)
		}
		urls[i] = u
	}
	b.run(t, what+": a click", chromedp.Click(button, chromedp.ByQuery))
	return urls
}

// signIn signs in on the sign-in page as user.
func (b *browser) signIn(user, password string) chromedp.Action {
	return chromedp.Tasks{
		chromedp.Navigate(b.base + "/signin"),
		chromedp.SendKeys(`input[name=username]`, user, chromedp.ByQuery),
		chromedp.SendKeys(`input[name=password]`, password, chromedp.ByQuery),
		chromedp.Click(`#signin button`, chromedp.ByQuery),
		chromedp.WaitVisible(`#whoami`, chromedp.ByQuery),
	}
}

func addToCart(base string, product uint64, qty int) chromedp.Action {
	sel := fmt.Sprintf(`[data-product="%d"]`, product)
	return chromedp.Tasks{
		chromedp.Navigate(base + "/"),
		chromedp.SetValue(sel+` input[name=quantity]`, strconv.Itoa(qty), chromedp.ByQuery),
		chromedp.Click(sel+` button`, chromedp.ByQuery),
		chromedp.WaitVisible(`#checkout`, chromedp.ByQuery),
	}
}

// shot writes a PNG of the page to WEB_SCREENSHOTS/name.png, if set.
func (b *browser) shot(t *testing.T, name string) {
	t.Helper()
	if screenshots == "" {
		return
	}
	var png []byte
	b.run(t, "screenshot "+name, chromedp.CaptureScreenshot(&png))
	if err := os.WriteFile(filepath.Join(screenshots, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// forgedToken is a well-formed access token for userID from issuer, signed
// by a key of its own that the issuer never published.
func forgedToken(t *testing.T, issuer string, userID uint64) string {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := auth.NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := s.Sign(auth.Claims{Issuer: issuer, Subject: strconv.FormatUint(userID, 10), Audience: []string{"oncemall"},
		Roles: []string{auth.RoleCustomer}, IssuedAt: now, Expiry: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
