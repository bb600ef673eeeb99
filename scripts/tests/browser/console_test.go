package browser_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/scripts/tests/proctest"
)

// TestConsole: the operator signs in, creates a product with its stock,
// changes the stock, creates a coupon template and issues a coupon of it to
// alice, all from the console, and sees each in the console and in the
// services' databases. Alice gets 403 on the console. In lab mode the
// operator arms a lost COMMIT acknowledgement on the fault proxy in front
// of the coupon service's database; alice buys the product with the
// coupon and pays; the console then shows the acknowledgement lost and the
// redelivery absorbed, and the coupon database holds one deduction for the
// order; a storm of payment notifications and a double submit armed from
// the console for the same purchase make one order and one payment, the
// copies answered without effect. A storefront in production mode has the console but no lab: its
// /console/lab is 404.
func TestConsole(t *testing.T) {
	r := startRig(t)
	b := newBrowser(t, r.web.URL(""))
	b.run(t, "sign in as operator", b.signIn("operator", "operator-dev-password"),
		chromedp.WaitVisible(`#nav-console`, chromedp.ByQuery))

	// A product, created with 5 units, then set to 8.
	model := "L-" + testenv.RandomSuffix(6)
	b.run(t, "create a product", chromedp.Navigate(b.base+"/console/products"),
		chromedp.SendKeys(`#new-product input[name=name]`, "Lamp", chromedp.ByQuery),
		chromedp.SendKeys(`#new-product input[name=model]`, model, chromedp.ByQuery),
		chromedp.SendKeys(`#new-product input[name=price]`, "20.00", chromedp.ByQuery),
		chromedp.SetValue(`#new-product input[name=stock]`, "5", chromedp.ByQuery),
		chromedp.Click(`#create-product`, chromedp.ByQuery), chromedp.WaitVisible(`#done`, chromedp.ByQuery))
	var lamp uint64
	if err := r.order.db.QueryRow("SELECT id FROM products WHERE brand = 'browser' AND model = ?", model).Scan(&lamp); err != nil {
		t.Fatalf("the product created from the console is not in the order database: %v", err)
	}
	row := fmt.Sprintf(`#console-products [data-product="%d"]`, lamp)
	b.run(t, "the product's row", chromedp.WaitVisible(row+` .stock[data-stock="5"]`, chromedp.ByQuery))
	b.run(t, "set its stock", chromedp.SetValue(row+` input[name=available]`, "8", chromedp.ByQuery),
		chromedp.Click(row+` button`, chromedp.ByQuery), chromedp.WaitVisible(row+` .stock[data-stock="8"]`, chromedp.ByQuery))
	if got := r.stock(t, lamp); got != 8 {
		t.Fatalf("stock set to 8 from the console: %d in the order database", got)
	}
	b.fullShot(t, "console-products")

	// A template, 4.00 off orders of 10.00 or more, and a coupon of it
	// issued to alice.
	var tmplID string
	b.run(t, "create a template", chromedp.Navigate(b.base+"/console/coupons"),
		chromedp.SendKeys(`#new-template input[name=name]`, "Lamp week", chromedp.ByQuery),
		chromedp.SendKeys(`#new-template input[name=discount]`, "4.00", chromedp.ByQuery),
		chromedp.SetValue(`#new-template input[name=min_order]`, "10.00", chromedp.ByQuery),
		chromedp.Click(`#create-template`, chromedp.ByQuery), chromedp.WaitVisible(`#template`, chromedp.ByQuery),
		chromedp.AttributeValue(`#template`, "data-template", &tmplID, nil, chromedp.ByQuery))
	var done string
	b.run(t, "issue a coupon to alice", chromedp.SendKeys(`#issue-coupon input[name=user_id]`, strconv.Itoa(alice), chromedp.ByQuery),
		chromedp.Click(`#issue`, chromedp.ByQuery), chromedp.WaitVisible(`#done`, chromedp.ByQuery), chromedp.Text(`#done`, &done, chromedp.ByQuery))
	var coupon uint64
	var discount int64
	if err := r.coupon.db.QueryRow(`SELECT c.id, t.discount_amount FROM coupons c JOIN coupon_template t ON t.id = c.template_id
		WHERE c.user_id = ? AND c.template_id = ?`, alice, tmplID).Scan(&coupon, &discount); err != nil {
		t.Fatalf("the coupon issued from the console is not in the coupon database: %v", err)
	}
	if discount != 400 || !strings.Contains(done, fmt.Sprintf("Coupon #%d issued to user %d", coupon, alice)) {
		t.Errorf("coupon %d of template %s: discount %d, the console says %q", coupon, tmplID, discount, done)
	}
	b.fullShot(t, "console-coupons")
	b.run(t, "findings", chromedp.Navigate(b.base+"/console"),
		chromedp.WaitVisible(`[data-service="coupon"] [data-findings="0"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`[data-service="order"] [data-findings]`, chromedp.ByQuery),
		chromedp.WaitVisible(`[data-service="payment"] [data-findings]`, chromedp.ByQuery))
	b.fullShot(t, "console-findings")

	// The production storefront, on the same services: the console is
	// there for the operator, the lab switches are not.
	session := b.cookie(t, "oncemall_session")
	webProd := startWeb(t, r, "production", "WEB_COOKIE_KEY=web-production-cookie-key-"+testenv.RandomSuffix(8))
	for _, c := range []struct {
		base, path string
		want       int
	}{
		{r.web.URL(""), "/console/lab", http.StatusOK},
		{webProd.URL(""), "/console", http.StatusOK},
		{webProd.URL(""), "/console/lab", http.StatusNotFound},
		{webProd.URL(""), "/console/lab/counts", http.StatusNotFound},
	} {
		if got := getWith(t, c.base+c.path, session); got != c.want {
			t.Errorf("the operator's GET %s on the %s storefront: %d, want %d", c.path, c.base, got, c.want)
		}
	}

	// Lab: arm one lost acknowledgement of a deduction's COMMIT.
	b.run(t, "arm a lost COMMIT ACK", chromedp.Navigate(b.base+"/console/lab"),
		clickUntilDone(`#arm-lost-ack`, "acknowledgement(s) armed"))
	var armed string
	b.run(t, "armed", chromedp.Text(`[data-count="armed"] [data-field="now"]`, &armed, chromedp.ByQuery))
	if armed != "1" {
		t.Fatalf("the console says %q acknowledgements are armed, want 1", armed)
	}
	// And a storm for the next charge's notification: 5 copies at once, 2
	// replays, the first answer lost.
	b.run(t, "file a storm", clickUntilDone(`#arm-storm`, "as a storm"))
	// And the next two submits, "Place order" and "Pay", sent twice at once.
	b.run(t, "arm a double submit", clickUntilDone(`#arm-double`, "sent twice at once"))

	// Alice: no console; she buys the lamp with the coupon and pays.
	b.signOut(t)
	b.run(t, "sign in as alice", b.signIn("alice", "alice-dev-password"))
	b.run(t, "alice on the console", chromedp.Navigate(b.base+"/console"), chromedp.WaitVisible(`#problem[data-status="403"]`, chromedp.ByQuery))
	if got := getWith(t, r.web.URL("/console/lab"), b.cookie(t, "oncemall_session")); got != http.StatusForbidden {
		t.Errorf("alice's GET /console/lab: %d, want 403", got)
	}
	orderNo := b.buyAndPay(t, lamp, coupon)

	// The operator's console: the acknowledgement was lost, the
	// redelivery absorbed, no order deducted twice.
	b.signOut(t)
	b.run(t, "sign in as operator again", b.signIn("operator", "operator-dev-password"))
	// Alice's order was placed in this browser; the operator's orders page
	// lists the operator's orders, none.
	var ordersPage string
	b.run(t, "the operator's orders", chromedp.Navigate(b.base+"/orders"), chromedp.Text(`main`, &ordersPage, chromedp.ByQuery))
	if !strings.Contains(ordersPage, "No orders yet.") || strings.Contains(ordersPage, orderNo) {
		t.Errorf("the operator's orders page, after alice ordered %s in this browser:\n%s", orderNo, ordersPage)
	}
	b.run(t, "the lab's counts", chromedp.Navigate(b.base+"/console/lab"),
		chromedp.Poll(`document.querySelector('[data-count="acks_dropped"] [data-field="since"]').textContent === "1"
			&& Number(document.querySelector('[data-count="inbox_duplicates"] [data-field="since"]').textContent)
			 + Number(document.querySelector('[data-count="retries_absorbed"] [data-field="since"]').textContent) >= 1`, nil))
	counts := map[string]string{}
	for _, k := range []string{"armed", "deductions", "double_deductions"} {
		var v string
		b.run(t, "count "+k, chromedp.Text(fmt.Sprintf(`[data-count="%s"] [data-field="now"]`, k), &v, chromedp.ByQuery))
		counts[k] = v
	}
	if counts["armed"] != "0" || counts["double_deductions"] != "0" {
		t.Errorf("after the purchase the console shows %v, want nothing armed and no order deducted twice", counts)
	}
	b.run(t, "the storm's counts", chromedp.Poll(`document.querySelector('[data-count="callbacks_processed"] [data-field="since"]').textContent === "1"
			&& Number(document.querySelector('[data-count="callbacks_duplicate"] [data-field="since"]').textContent) >= 1`, nil))
	var multiple string
	b.run(t, "multiple payments", chromedp.Text(`[data-count="multiple_payments"] [data-field="now"]`, &multiple, chromedp.ByQuery))
	if multiple != "0" {
		t.Errorf("after the storm the console shows %s orders with more than one payment, want 0", multiple)
	}
	b.run(t, "the double submit's counts", chromedp.Poll(`["doubled", "orders_first", "payments_first"].every(k =>
			document.querySelector('[data-count="' + k + '"] [data-field="since"]').textContent === (k === "doubled" ? "2" : "1"))
		&& document.querySelector('[data-count="split"] [data-field="now"]').textContent === "0"
		&& Number(document.querySelector('[data-count="orders_replayed"] [data-field="since"]').textContent) >= 1
		&& Number(document.querySelector('[data-count="payments_replayed"] [data-field="since"]').textContent) >= 1`, nil))
	if n := count(t, r.order.db, "SELECT COUNT(*) FROM orders WHERE user_id = ?", alice); n != 1 {
		t.Errorf("a purchase whose Place order was sent twice: alice has %d orders, want 1", n)
	}
	b.fullShot(t, "console-lab")
	b.elementShot(t, "console-lab-lost-ack", "#lost-ack")
	for what, q := range map[string]string{
		"payments":             "SELECT COUNT(*) FROM payments WHERE order_no = ?",
		"payment transactions": "SELECT COUNT(*) FROM payment_transaction t JOIN payments p ON p.platform_serial = t.platform_serial WHERE p.order_no = ?",
	} {
		if n := count(t, r.payment.db, q, orderNo); n != 1 {
			t.Errorf("order %s after the storm: %d %s, want 1", orderNo, n, what)
		}
	}
	if n := count(t, r.coupon.db, "SELECT COUNT(*) FROM coupon_deduction WHERE order_no = ?", orderNo); n != 1 {
		t.Errorf("order %s: %d deductions in the coupon database, want 1", orderNo, n)
	}
	if got := r.couponStatus(t, coupon); got != "USED" {
		t.Errorf("coupon %d: %s, want USED", coupon, got)
	}
}

// TestConsoleBrokenDeduction: the coupon service, started with the fixed
// deduction, is switched from the console to incident 1's broken one while
// it runs (its lab route applies the incident's schema: the ledger without
// its per-order unique key); the same lost COMMIT acknowledgement, armed
// from the console, then has the retry deduct again, and the console shows
// the two deductions and the reconciler's finding, as the coupon database
// counts them. Switched back, the service says fixed.
func TestConsoleBrokenDeduction(t *testing.T) {
	r := startRig(t)
	if n := count(t, r.coupon.db, `SELECT COUNT(*) FROM information_schema.statistics
		WHERE table_schema = DATABASE() AND table_name = 'coupon_deduction' AND index_name = 'uk_coupon_deduction_order'`); n == 0 {
		t.Fatal("the coupon database has no per-order unique key before the switch")
	}
	lamp := r.newProduct(t, "Lamp", 2000, 5)
	coupon := r.newCoupon(t, alice, 400, 1000)

	b := newBrowser(t, r.web.URL(""))
	b.run(t, "sign in as operator", b.signIn("operator", "operator-dev-password"))
	b.run(t, "switch the deduction to broken", chromedp.Navigate(b.base+"/console/lab"),
		chromedp.WaitVisible(`#deduction-mode[data-mode="fixed"]`, chromedp.ByQuery),
		chromedp.SetValue(`select[name=mode]`, "broken", chromedp.ByQuery),
		clickUntilDone(`#set-deduction`, "with the broken code"),
		chromedp.WaitVisible(`#deduction-mode[data-mode="broken"]`, chromedp.ByQuery))
	if n := count(t, r.coupon.db, `SELECT COUNT(*) FROM information_schema.statistics
		WHERE table_schema = DATABASE() AND table_name = 'coupon_deduction' AND index_name = 'uk_coupon_deduction_order'`); n != 0 {
		t.Fatal("switched to broken, the coupon ledger still has its per-order unique key")
	}
	b.run(t, "arm a lost COMMIT ACK", chromedp.Navigate(b.base+"/console/lab"),
		chromedp.Click(`#arm-lost-ack`, chromedp.ByQuery), chromedp.WaitVisible(`#done`, chromedp.ByQuery))
	b.signOut(t)
	b.run(t, "sign in as alice", b.signIn("alice", "alice-dev-password"))
	orderNo := b.buyAndPay(t, lamp, coupon)

	b.signOut(t)
	b.run(t, "sign in as operator again", b.signIn("operator", "operator-dev-password"))
	b.run(t, "the lab's counts", chromedp.Navigate(b.base+"/console/lab"),
		chromedp.Poll(`document.querySelector('[data-count="double_deductions"] [data-field="now"]').textContent === "1"
			&& document.querySelector('[data-count="acks_dropped"] [data-field="since"]').textContent === "1"
			&& document.querySelector('[data-count="deductions"] [data-field="since"]').textContent === "1"`, nil))
	b.elementShot(t, "console-lab-broken", "#lost-ack")
	if n := count(t, r.coupon.db, "SELECT COUNT(*) FROM coupon_deduction WHERE order_no = ?", orderNo); n != 2 {
		t.Errorf("order %s: %d deductions in the coupon database, want the incident's 2", orderNo, n)
	}
	b.run(t, "switch the deduction back", chromedp.SetValue(`select[name=mode]`, "fixed", chromedp.ByQuery),
		clickUntilDone(`#set-deduction`, "with the fixed code"),
		chromedp.WaitVisible(`#deduction-mode[data-mode="fixed"]`, chromedp.ByQuery))
}

// startWeb starts a second storefront on r's services in env mode.
func startWeb(t *testing.T, r *rig, env string, extra ...string) *proctest.Process {
	t.Helper()
	addr := testenv.FreeAddr(t)
	p := proctest.Start(t, "web-"+env, r.webBin, addr,
		append(append([]string{"HTTP_ADDR=" + addr, "ONCEMALL_ENV=" + env}, r.webEnv...), extra...)...)
	p.WaitStatus(t, "/readyz", http.StatusOK, deadline)
	t.Cleanup(func() { p.Stop(t, 20*time.Second) })
	return p
}

// getWith GETs url with the session cookie and returns the status, not
// following redirects.
func getWith(t *testing.T, url, session string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(&http.Cookie{Name: "oncemall_session", Value: session})
	hc := &http.Client{Timeout: client.Timeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// cookie returns the value of the browser's cookie name.
func (b *browser) cookie(t *testing.T, name string) string {
	t.Helper()
	var value string
	b.run(t, "cookie "+name, chromedp.ActionFunc(func(ctx context.Context) error {
		cs, err := network.GetCookies().Do(ctx)
		for _, c := range cs {
			if c.Name == name {
				value = c.Value
			}
		}
		return err
	}))
	if value == "" {
		t.Fatalf("the browser has no cookie %s", name)
	}
	return value
}

// fullShot writes a PNG of the whole page, beyond the window, to
// WEB_SCREENSHOTS/name.png, if set.
func (b *browser) fullShot(t *testing.T, name string) {
	t.Helper()
	if screenshots == "" {
		return
	}
	var png []byte
	b.run(t, "screenshot "+name, chromedp.FullScreenshot(&png, 100)) // 100: PNG
	if err := os.WriteFile(filepath.Join(screenshots, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// elementShot writes a PNG of the element sel to WEB_SCREENSHOTS/name.png,
// if set.
func (b *browser) elementShot(t *testing.T, name, sel string) {
	t.Helper()
	if screenshots == "" {
		return
	}
	var png []byte
	b.run(t, "screenshot "+name, chromedp.Screenshot(sel, &png, chromedp.ByQuery))
	if err := os.WriteFile(filepath.Join(screenshots, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// clickUntilDone clicks button and waits for the page it leads to, whose
// #done says text: the page before may have a #done of its own.
func clickUntilDone(button, text string) chromedp.Action {
	return chromedp.Tasks{chromedp.Click(button, chromedp.ByQuery),
		chromedp.WaitVisible(`//p[@id="done"][contains(., "`+text+`")]`, chromedp.BySearch)}
}

// signOut signs the browser's user out.
func (b *browser) signOut(t *testing.T) {
	t.Helper()
	b.run(t, "sign out", chromedp.Click(`header form button`, chromedp.ByQuery), chromedp.WaitVisible(`#nav-signin`, chromedp.ByQuery))
}

// buyAndPay buys one of product with coupon as the signed-in user, pays on
// the platform's page and waits for the order PAID and the coupon USED. It
// returns the order's number.
func (b *browser) buyAndPay(t *testing.T, product, coupon uint64) string {
	t.Helper()
	b.run(t, "buy with the coupon", addToCart(b.base, product, 1),
		chromedp.SetValue(`#coupon`, strconv.FormatUint(coupon, 10), chromedp.ByQuery),
		chromedp.Click(`#place-order`, chromedp.ByQuery), chromedp.WaitVisible(`#pay-button`, chromedp.ByQuery))
	var orderNo string
	b.run(t, "pay", chromedp.Text(`#order-no`, &orderNo, chromedp.ByQuery), chromedp.Click(`#pay-button`, chromedp.ByQuery),
		chromedp.WaitVisible(`#return`, chromedp.ByQuery), chromedp.Click(`#return`, chromedp.ByQuery),
		chromedp.WaitVisible(`#order-status[data-status="PAID"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#coupon-status[data-status="USED"]`, chromedp.ByQuery))
	return orderNo
}
