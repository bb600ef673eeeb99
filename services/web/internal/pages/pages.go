// Package pages is the storefront's web interface: server-rendered pages
// (html/template, embedded) over the services' public APIs, and one JSON
// endpoint the order pages poll for status. It owns no business data: the
// session is identity's token in a cookie, the cart is a cookie too
// (cookies.go).
//
// Every form carries a CSRF token, and the forms with an effect one
// Idempotency-Key made when the form was rendered, which the storefront
// passes on: a double click, a resubmit or a "Try again" after a failure
// sends the same key, and the service answers it with the one order or
// payment the first made.
package pages

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/psp"
	"github.com/oncemall/oncemall/services/web/internal/upstream"
)

// Shop is what the pages call: upstream.Client.
type Shop interface {
	SignIn(ctx context.Context, username, password string) (upstream.Token, error)
	Products(ctx context.Context, brand string) ([]upstream.Product, error)
	Product(ctx context.Context, id uint64) (upstream.Product, error)
	Coupons(ctx context.Context, who upstream.Caller) ([]upstream.Coupon, error)
	Coupon(ctx context.Context, who upstream.Caller, id uint64) (upstream.Coupon, error)
	PlaceOrder(ctx context.Context, who upstream.Caller, key string, items []upstream.Item, couponID uint64) (upstream.Order, error)
	Order(ctx context.Context, who upstream.Caller, no string) (upstream.Order, error)
	Orders(ctx context.Context, who upstream.Caller) ([]upstream.Order, error)
	CancelOrder(ctx context.Context, who upstream.Caller, no string) (upstream.Order, error)
	Pay(ctx context.Context, who upstream.Caller, key, orderNo string) (upstream.Payment, error)
	Payment(ctx context.Context, who upstream.Caller, outTradeNo string) (upstream.Payment, error)
	Trade(ctx context.Context, outTradeNo string) (psp.Trade, error)
}

// Verifier checks the session's token: auth.Verifier.
type Verifier interface {
	Verify(ctx context.Context, raw string) (auth.Principal, error)
}

// Options configure the pages.
type Options struct {
	Log   *slog.Logger
	Brand string // whose products the catalog shows
	// CookieKey signs the CSRF tokens; CookieSecure marks the cookies
	// Secure.
	CookieKey    []byte
	CookieSecure bool
	// Operator is what the console calls; nil: no console.
	Operator Operator
	// Sections are the console's parts made elsewhere (lab mode's
	// switches); none in production.
	Sections []Section
}

// Pages serves the storefront.
type Pages struct {
	shop    Shop
	verify  Verifier
	log     *slog.Logger
	brand   string
	cookies cookies
	views   *views

	operator Operator
	sections []Section
}

// New returns the storefront's pages over shop, with sessions checked by v.
func New(shop Shop, v Verifier, opts Options) (*Pages, error) {
	if len(opts.CookieKey) == 0 {
		return nil, errors.New("pages: no cookie key")
	}
	views, err := parseViews()
	if err != nil {
		return nil, err
	}
	for _, s := range opts.Sections {
		if err := views.add(s.Templates); err != nil {
			return nil, fmt.Errorf("pages: console section %s: %w", s.Name, err)
		}
	}
	return &Pages{shop: shop, verify: v, log: opts.Log, brand: opts.Brand,
		cookies: cookies{key: opts.CookieKey, secure: opts.CookieSecure}, views: views,
		operator: opts.Operator, sections: opts.Sections}, nil
}

// Register installs the pages on r.
func (p *Pages) Register(r gin.IRouter) {
	r.GET("/static/*file", p.static)
	r.GET("/", p.catalog)
	r.GET("/signin", p.signInPage)
	r.POST("/signin", p.form, p.signIn)
	r.POST("/signout", p.form, p.signOut)
	r.POST("/cart/add", p.form, p.addToCart)
	r.POST("/cart/remove", p.form, p.removeFromCart)

	user := r.Group("/", p.requireUser)
	user.GET("/cart", p.cart)
	user.GET("/coupons", p.coupons)
	user.POST("/checkout", p.form, p.placeOrder)
	user.GET("/orders", p.orders)
	user.GET("/orders/:no", p.order)
	user.POST("/orders/:no/pay", p.form, p.pay)
	user.POST("/orders/:no/cancel", p.form, p.cancel)
	user.GET("/platform/:trade", p.platform)
	user.GET("/api/orders/:no", p.orderStatus)

	if p.operator != nil {
		p.registerConsole(r)
	}
}

// session is the request's verified user, if any.
type session struct {
	caller   upstream.Caller
	name     string
	operator bool // the token carries auth.RoleOperator
}

// user returns the verified user of r's session cookie. A cookie whose token
// does not verify (forged, expired, another issuer's) is no session, and is
// cleared; a token that cannot be checked now (the issuer's keys out of
// reach) is an error.
func (p *Pages) user(c *gin.Context) (*session, error) {
	if s, ok := c.Get("session"); ok {
		return s.(*session), nil
	}
	raw := value(c.Request, cookieSession)
	if raw == "" {
		return nil, nil
	}
	pr, err := p.verify.Verify(c.Request.Context(), raw)
	if errors.Is(err, auth.ErrKeysUnavailable) {
		return nil, err
	}
	if err != nil {
		p.log.WarnContext(c.Request.Context(), "session token refused", "err", err)
		p.cookies.clear(c.Writer, cookieSession)
		p.cookies.clear(c.Writer, cookieUser)
		return nil, nil
	}
	name, _ := url.QueryUnescape(value(c.Request, cookieUser))
	if name == "" {
		name = "user " + strconv.FormatUint(pr.UserID, 10)
	}
	s := &session{caller: upstream.Caller{Token: raw, UserID: pr.UserID}, name: name, operator: pr.HasRole(auth.RoleOperator)}
	c.Set("session", s)
	return s, nil
}

// requireUser lets through requests with a verified session; a page asked
// without one goes to the sign-in page, anything else is 401.
func (p *Pages) requireUser(c *gin.Context) {
	s, err := p.user(c)
	if err != nil {
		p.fail(c, err)
		c.Abort()
		return
	}
	if s != nil {
		return
	}
	if c.Request.Method == http.MethodGet && !isAPI(c) {
		c.Redirect(http.StatusSeeOther, "/signin?next="+url.QueryEscape(c.Request.URL.RequestURI()))
		c.Abort()
		return
	}
	p.problem(c, http.StatusUnauthorized, "Sign in first", "This needs a signed-in user, and the session is missing or was refused.")
	c.Abort()
}

// form parses the posted form and checks its CSRF token: a form another
// site made, or one from before the browser's CSRF cookie, is 403.
func (p *Pages) form(c *gin.Context) {
	if err := c.Request.ParseForm(); err != nil {
		p.problem(c, http.StatusBadRequest, "Unreadable form", "The form could not be read.")
		c.Abort()
		return
	}
	if !p.cookies.checkCSRF(c.Request) {
		p.log.WarnContext(c.Request.Context(), "form refused: CSRF token missing or wrong", "path", c.FullPath())
		p.problem(c, http.StatusForbidden, "This form has expired",
			"The form did not carry this browser's token (it came from another site, or from before the cookies were cleared). Reload the page and submit it again.")
		c.Abort()
	}
}

func isAPI(c *gin.Context) bool { return len(c.FullPath()) > 5 && c.FullPath()[:5] == "/api/" }

// idempotencyKey is a fresh key for one rendered form.
func idempotencyKey() string { return "web-" + randomHex(16) }
