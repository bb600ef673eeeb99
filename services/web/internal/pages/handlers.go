package pages

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/services/web/internal/upstream"
)

func (p *Pages) catalog(c *gin.Context) {
	products, err := p.shop.Products(c.Request.Context(), p.brand)
	if err != nil {
		p.fail(c, err)
		return
	}
	p.render(c, http.StatusOK, "catalog", map[string]any{"Products": products})
}

func (p *Pages) signInPage(c *gin.Context) {
	p.render(c, http.StatusOK, "signin", map[string]any{"Next": safeNext(c.Query("next"))})
}

// signIn trades the user's name and password for identity's token and keeps
// it in the session cookie until it expires.
func (p *Pages) signIn(c *gin.Context) {
	name, password := strings.TrimSpace(c.PostForm("username")), c.PostForm("password")
	next := safeNext(c.PostForm("next"))
	if name == "" || password == "" {
		p.render(c, http.StatusBadRequest, "signin", map[string]any{"Next": next, "Username": name, "Error": "Enter a user name and a password."})
		return
	}
	tok, err := p.shop.SignIn(c.Request.Context(), name, password)
	switch status := upstream.StatusOf(err); {
	case status == http.StatusUnauthorized, status == http.StatusBadRequest:
		p.log.InfoContext(c.Request.Context(), "sign-in refused", "username", name, "status", status)
		p.render(c, http.StatusUnauthorized, "signin", map[string]any{"Next": next, "Username": name, "Error": "That user name and password do not match."})
		return
	case status == http.StatusTooManyRequests:
		p.render(c, http.StatusTooManyRequests, "signin", map[string]any{"Next": next, "Username": name, "Error": "Too many attempts for this user; wait a minute and try again."})
		return
	case err != nil:
		p.fail(c, err)
		return
	}
	pr, err := p.verify.Verify(c.Request.Context(), tok.AccessToken)
	if err != nil {
		p.fail(c, err)
		return
	}
	ttl := time.Until(pr.Expiry)
	p.cookies.set(c.Writer, cookieSession, tok.AccessToken, ttl)
	p.cookies.set(c.Writer, cookieUser, url.QueryEscape(name), ttl)
	p.log.InfoContext(c.Request.Context(), "signed in", "user_id", pr.UserID)
	c.Redirect(http.StatusSeeOther, next)
}

func (p *Pages) signOut(c *gin.Context) {
	for _, name := range []string{cookieSession, cookieUser, cookieCart} {
		p.cookies.clear(c.Writer, name)
	}
	c.Redirect(http.StatusSeeOther, "/")
}

// safeNext is where to go after signing in: a path of this site, never
// another site ("//evil.example", "https://…").
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/"
	}
	return next
}

func (p *Pages) addToCart(c *gin.Context) {
	id, err1 := strconv.ParseUint(c.PostForm("product_id"), 10, 64)
	qty, err2 := strconv.Atoi(c.DefaultPostForm("quantity", "1"))
	if err1 != nil || id == 0 || err2 != nil || qty < 1 || qty > maxQuantity {
		p.problem(c, http.StatusBadRequest, "Not a product or quantity", "Choose a product and a quantity from 1 to 999.")
		return
	}
	p.cookies.writeCart(c.Writer, addToCart(readCart(c.Request), id, qty))
	c.Redirect(http.StatusSeeOther, "/cart")
}

func (p *Pages) removeFromCart(c *gin.Context) {
	id, _ := strconv.ParseUint(c.PostForm("product_id"), 10, 64)
	p.cookies.writeCart(c.Writer, removeFromCart(readCart(c.Request), id))
	c.Redirect(http.StatusSeeOther, "/cart")
}

// cartLine is a cart line with its product as the catalog has it now.
type cartLine struct {
	upstream.Product
	Quantity int
	Subtotal int64
}

// cart shows the cart priced at today's catalog prices, the user's unused
// coupons, and the "Place order" form with its Idempotency-Key.
func (p *Pages) cart(c *gin.Context) {
	s, _ := p.user(c)
	ctx := c.Request.Context()
	var lines []cartLine
	var total int64
	for _, l := range readCart(c.Request) {
		pr, err := p.shop.Product(ctx, l.ProductID)
		if upstream.StatusOf(err) == http.StatusNotFound {
			continue // no longer for sale; placing the order would refuse it
		}
		if err != nil {
			p.fail(c, err)
			return
		}
		sub := pr.Price * int64(l.Quantity)
		lines = append(lines, cartLine{Product: pr, Quantity: l.Quantity, Subtotal: sub})
		total += sub
	}
	coupons, err := p.shop.Coupons(ctx, s.caller)
	if err != nil {
		p.fail(c, err)
		return
	}
	coupons = slices.DeleteFunc(coupons, func(cp upstream.Coupon) bool { return cp.Status != "UNUSED" })
	p.render(c, http.StatusOK, "cart", map[string]any{"Lines": lines, "Total": total, "Coupons": coupons, "Key": idempotencyKey()})
}

// placeOrder places the cart's order with the form's Idempotency-Key. Every
// submit of one rendered form (a double click, a retry after an error page)
// names the same key, so it lands on the one order the first made.
func (p *Pages) placeOrder(c *gin.Context) {
	s, _ := p.user(c)
	key := c.PostForm("key")
	if !validKey(key) {
		p.problem(c, http.StatusBadRequest, "The form is incomplete", "Reload the cart and place the order again.")
		return
	}
	var coupon uint64
	if v := c.PostForm("coupon_id"); v != "" {
		id, err := strconv.ParseUint(v, 10, 64)
		if err != nil || id == 0 {
			p.problem(c, http.StatusBadRequest, "Not a coupon", "Choose one of your coupons, or none.")
			return
		}
		coupon = id
	}
	// The items are the form's, not the cart cookie's: a resubmit of this
	// form is the same request even if the cart changed in between.
	items, ok := formItems(c.PostFormArray("item"))
	if !ok {
		p.problem(c, http.StatusBadRequest, "Nothing to order", "The cart is empty or the form is incomplete; reload the cart.")
		return
	}
	o, err := p.shop.PlaceOrder(c.Request.Context(), s.caller, key, items, coupon)
	if err != nil {
		p.fail(c, err)
		return
	}
	p.log.InfoContext(c.Request.Context(), "order placed", "user_id", s.caller.UserID, "order_no", o.OrderNo, "idempotency_key", key)
	p.cookies.writeCart(c.Writer, nil)
	c.Redirect(http.StatusSeeOther, "/orders/"+o.OrderNo)
}

// formItems parses the form's "item" fields, "<product>-<quantity>" each.
func formItems(fields []string) ([]upstream.Item, bool) {
	if len(fields) == 0 || len(fields) > maxCartLines {
		return nil, false
	}
	items := make([]upstream.Item, 0, len(fields))
	for _, f := range fields {
		id, qty, ok := strings.Cut(f, "-")
		pid, err1 := strconv.ParseUint(id, 10, 64)
		q, err2 := strconv.Atoi(qty)
		if !ok || err1 != nil || err2 != nil || pid == 0 || q < 1 || q > maxQuantity {
			return nil, false
		}
		items = append(items, upstream.Item{ProductID: pid, Quantity: q})
	}
	return items, true
}

func validKey(k string) bool { return strings.HasPrefix(k, "web-") && len(k) == 36 }

// orderView is an order with what its page shows beside it.
type orderView struct {
	upstream.Order
	CouponStatus  string
	PaymentStatus string
}

// view reads the order, its coupon's status and its payment's.
func (p *Pages) view(c *gin.Context, who upstream.Caller, no string) (orderView, error) {
	ctx := c.Request.Context()
	o, err := p.shop.Order(ctx, who, no)
	if err != nil {
		return orderView{}, err
	}
	v := orderView{Order: o}
	if o.CouponID != 0 {
		cp, err := p.shop.Coupon(ctx, who, o.CouponID)
		if err != nil {
			return v, err
		}
		v.CouponStatus = cp.Status
	}
	if o.PaymentNo != "" {
		pay, err := p.shop.Payment(ctx, who, o.PaymentNo)
		if err != nil {
			return v, err
		}
		v.PaymentStatus = pay.Status
	}
	return v, nil
}

func (p *Pages) orderNo(c *gin.Context) (string, bool) {
	no := c.Param("no")
	if !validOrderNo(no) {
		p.problem(c, http.StatusNotFound, "No such order", "There is no order with this number.")
		return "", false
	}
	return no, true
}

// ownOrder is the view of the route's order for the signed-in user; false
// when it has answered instead (no such order, a failed call).
func (p *Pages) ownOrder(c *gin.Context) (orderView, bool) {
	s, _ := p.user(c)
	no, ok := p.orderNo(c)
	if !ok {
		return orderView{}, false
	}
	v, err := p.view(c, s.caller, no)
	if err != nil {
		p.fail(c, err)
		return orderView{}, false
	}
	return v, true
}

func (p *Pages) order(c *gin.Context) {
	v, ok := p.ownOrder(c)
	if !ok {
		return
	}
	p.render(c, http.StatusOK, "order", map[string]any{"Order": v, "PayKey": idempotencyKey()})
}

// orders lists the user's newest orders, as the order service answers
// them to their owner.
func (p *Pages) orders(c *gin.Context) {
	s, _ := p.user(c)
	list, err := p.shop.Orders(c.Request.Context(), s.caller)
	if err != nil {
		p.fail(c, err)
		return
	}
	p.render(c, http.StatusOK, "orders", map[string]any{"Orders": list})
}

// orderStatus is the JSON the order pages poll.
func (p *Pages) orderStatus(c *gin.Context) {
	v, ok := p.ownOrder(c)
	if !ok {
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, gin.H{"order_no": v.OrderNo, "status": v.Status, "coupon_status": v.CouponStatus,
		"payment_status": v.PaymentStatus, "settled": settled(v)})
}

// settled reports whether nothing about the order will change any more
// without the user: it is cancelled, or paid with its coupon used.
func settled(v orderView) bool {
	switch v.Status {
	case "CANCELLED":
		return v.CouponStatus != "LOCKED"
	case "PAID":
		return v.CouponID == 0 || v.CouponStatus == "USED"
	}
	return false
}

// pay creates the order's payment with the form's Idempotency-Key, which
// charges it at the platform, and shows the platform's page for the charge.
func (p *Pages) pay(c *gin.Context) {
	s, _ := p.user(c)
	no, ok := p.orderNo(c)
	if !ok {
		return
	}
	key := c.PostForm("key")
	if !validKey(key) {
		p.problem(c, http.StatusBadRequest, "The form is incomplete", "Reload the order and pay again.")
		return
	}
	pay, err := p.shop.Pay(c.Request.Context(), s.caller, key, no)
	if err != nil {
		p.fail(c, err)
		return
	}
	p.log.InfoContext(c.Request.Context(), "payment created", "user_id", s.caller.UserID, "order_no", no,
		"out_trade_no", pay.OutTradeNo, "idempotency_key", key)
	c.Redirect(http.StatusSeeOther, "/platform/"+url.PathEscape(pay.OutTradeNo)+"?order="+url.QueryEscape(no))
}

// platform stands for the payment platform's checkout page: what the
// platform (the simulator) answers about the charge, and the way back.
func (p *Pages) platform(c *gin.Context) {
	s, _ := p.user(c)
	trade, order := c.Param("trade"), c.Query("order")
	if !validOrderNo(trade) || !validOrderNo(order) {
		p.problem(c, http.StatusNotFound, "No such payment", "There is no payment with this number.")
		return
	}
	// The payment is the user's (the payment service answers it to its
	// owner only) before the platform is asked about it.
	if _, err := p.shop.Payment(c.Request.Context(), s.caller, trade); err != nil {
		p.fail(c, err)
		return
	}
	t, err := p.shop.Trade(c.Request.Context(), trade)
	if err != nil {
		p.fail(c, err)
		return
	}
	p.render(c, http.StatusOK, "platform", map[string]any{"Trade": t, "OrderNo": order})
}

func (p *Pages) cancel(c *gin.Context) {
	s, _ := p.user(c)
	no, ok := p.orderNo(c)
	if !ok {
		return
	}
	if _, err := p.shop.CancelOrder(c.Request.Context(), s.caller, no); err != nil {
		p.fail(c, err)
		return
	}
	p.log.InfoContext(c.Request.Context(), "order cancelled", "user_id", s.caller.UserID, "order_no", no)
	c.Redirect(http.StatusSeeOther, "/orders/"+no)
}

func (p *Pages) coupons(c *gin.Context) {
	s, _ := p.user(c)
	list, err := p.shop.Coupons(c.Request.Context(), s.caller)
	if err != nil {
		p.fail(c, err)
		return
	}
	p.render(c, http.StatusOK, "coupons", map[string]any{"Coupons": list})
}
