package pages

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/services/web/internal/upstream"
)

// The operator's console, /console: the catalog's products and their stock,
// coupon templates and issuing, and the reconcilers' findings, each through
// the services' /admin APIs with the operator's own token. Only a session
// whose verified token carries auth.RoleOperator sees it: a customer gets
// 403, no session goes to the sign-in page.

// Operator is what the console calls on top of the storefront's Shop:
// upstream.Client.
type Operator interface {
	CreateProduct(ctx context.Context, who upstream.Caller, p upstream.NewProduct) (upstream.Product, error)
	SetStock(ctx context.Context, who upstream.Caller, id uint64, available int64) error
	CreateTemplate(ctx context.Context, who upstream.Caller, t upstream.Template) (upstream.Template, error)
	Template(ctx context.Context, who upstream.Caller, id uint64) (upstream.Template, error)
	IssueCoupon(ctx context.Context, who upstream.Caller, template, user uint64) (upstream.Coupon, error)
	Findings(ctx context.Context, who upstream.Caller, service string) ([]upstream.Finding, error)
}

// Section is a part of the console made outside this package: lab mode's
// incident switches (services/web/lab), which production builds do not
// have. Its pages are the console's: behind the operator check, under
// /console + Path, rendered in the layout with the forms' CSRF token.
type Section struct {
	// Name is its entry in the console's menu; Path its path under
	// /console ("/lab").
	Name, Path string
	// Templates holds its pages, "*.html", each defining "content" as the
	// storefront's own do; Kit.Render renders them by file name.
	Templates fs.FS
	// Routes installs its handlers on g, the group of /console + Path.
	Routes func(g gin.IRouter, k Kit)
}

// Kit is what a Section's handlers use of the storefront.
type Kit struct{ p *Pages }

// Render writes the section's page name (its file name without .html).
func (k Kit) Render(c *gin.Context, status int, name string, data map[string]any) {
	k.p.render(c, status, name, data)
}

// Fail shows the error page for err, an *upstream.Error or another failure.
func (k Kit) Fail(c *gin.Context, err error) { k.p.fail(c, err) }

// Problem shows the error page with title and detail.
func (k Kit) Problem(c *gin.Context, status int, title, detail string) {
	k.p.problem(c, status, title, detail)
}

// Form parses a posted form and refuses it without this browser's CSRF
// token: every POST route of a section starts with it.
func (k Kit) Form() gin.HandlerFunc { return k.p.form }

// Caller is the signed-in operator the request is made for.
func (k Kit) Caller(c *gin.Context) upstream.Caller {
	s, _ := k.p.user(c)
	return s.caller
}

// consoleServices are the services whose reconcilers the console asks.
var consoleServices = []string{"order", "coupon", "payment"}

func (p *Pages) registerConsole(r gin.IRouter) {
	g := r.Group("/console", p.requireOperator)
	g.GET("", p.findings)
	g.GET("/products", p.consoleProducts)
	g.POST("/products", p.form, p.createProduct)
	g.POST("/products/:id/stock", p.form, p.setStock)
	g.GET("/coupons", p.consoleCoupons)
	g.POST("/coupon-templates", p.form, p.createTemplate)
	g.POST("/coupons", p.form, p.issueCoupon)
	for _, s := range p.sections {
		s.Routes(g.Group(s.Path), Kit{p})
	}
}

// requireOperator lets through a session whose token carries the operator
// role; any other signed-in user gets 403, no session the sign-in page.
func (p *Pages) requireOperator(c *gin.Context) {
	if p.requireUser(c); c.IsAborted() {
		return
	}
	if s, _ := p.user(c); !s.operator {
		p.log.InfoContext(c.Request.Context(), "console refused: not an operator", "user_id", s.caller.UserID, "path", c.Request.URL.Path)
		p.problem(c, http.StatusForbidden, "Operators only", "The console is for users with the "+auth.RoleOperator+" role; this user does not have it.")
		c.Abort()
	}
}

// menuEntry is one entry of the console's menu.
type menuEntry struct{ Name, Path string }

func (p *Pages) menu() []menuEntry {
	m := []menuEntry{{"Findings", "/console"}, {"Products", "/console/products"}, {"Coupons", "/console/coupons"}}
	for _, s := range p.sections {
		m = append(m, menuEntry{s.Name, "/console" + s.Path})
	}
	return m
}

// serviceFindings is one reconciler's answer.
type serviceFindings struct {
	Service  string
	Findings []upstream.Finding
	Err      string // the reconciler could not be asked
}

// findings shows what each reconciler finds now: nothing is every
// invariant holding. A service that does not answer is shown as such, the
// others still are.
func (p *Pages) findings(c *gin.Context) {
	s, _ := p.user(c)
	var all []serviceFindings
	for _, svc := range consoleServices {
		f, err := p.operator.Findings(c.Request.Context(), s.caller, svc)
		sf := serviceFindings{Service: svc, Findings: f}
		if err != nil {
			p.log.WarnContext(c.Request.Context(), "reconciler not asked", "service", svc, "err", err)
			sf.Err = err.Error()
		}
		all = append(all, sf)
	}
	p.render(c, http.StatusOK, "console", map[string]any{"Services": all})
}

func (p *Pages) consoleProducts(c *gin.Context) {
	products, err := p.shop.Products(c.Request.Context(), p.brand)
	if err != nil {
		p.fail(c, err)
		return
	}
	p.render(c, http.StatusOK, "console-products", map[string]any{"Products": products, "Brand": p.brand,
		"Done": c.Query("done")})
}

// createProduct adds a product of the storefront's brand, and its stock
// when the form gives one.
func (p *Pages) createProduct(c *gin.Context) {
	s, _ := p.user(c)
	price, err1 := parseAmount(c.PostForm("price"))
	stock, err2 := strconv.ParseInt(c.DefaultPostForm("stock", "0"), 10, 64)
	name, model := strings.TrimSpace(c.PostForm("name")), strings.TrimSpace(c.PostForm("model"))
	if err1 != nil || err2 != nil || stock < 0 || name == "" || model == "" {
		p.problem(c, http.StatusBadRequest, "Not a product", "Give a name, a model, a price such as 12.50 and a stock of 0 or more.")
		return
	}
	ctx := c.Request.Context()
	pr, err := p.operator.CreateProduct(ctx, s.caller, upstream.NewProduct{Brand: p.brand, Name: name, Model: model, Price: price})
	if err != nil {
		p.fail(c, err)
		return
	}
	p.log.InfoContext(ctx, "product created", "user_id", s.caller.UserID, "product_id", pr.ID)
	if stock > 0 {
		if err := p.operator.SetStock(ctx, s.caller, pr.ID, stock); err != nil {
			p.fail(c, err)
			return
		}
	}
	c.Redirect(http.StatusSeeOther, "/console/products?done="+url.QueryEscape(fmt.Sprintf("Product #%d created with %d units.", pr.ID, stock)))
}

func (p *Pages) setStock(c *gin.Context) {
	s, _ := p.user(c)
	id, err1 := strconv.ParseUint(c.Param("id"), 10, 64)
	n, err2 := strconv.ParseInt(c.PostForm("available"), 10, 64)
	if err1 != nil || id == 0 || err2 != nil || n < 0 {
		p.problem(c, http.StatusBadRequest, "Not a stock", "Give the units that can be ordered, 0 or more.")
		return
	}
	if err := p.operator.SetStock(c.Request.Context(), s.caller, id, n); err != nil {
		p.fail(c, err)
		return
	}
	p.log.InfoContext(c.Request.Context(), "stock set", "user_id", s.caller.UserID, "product_id", id, "available", n)
	c.Redirect(http.StatusSeeOther, "/console/products?done="+url.QueryEscape(fmt.Sprintf("Product #%d has %d units.", id, n)))
}

// consoleCoupons shows the template just created (?template=), read back
// from the coupon service, and the forms.
func (p *Pages) consoleCoupons(c *gin.Context) {
	s, _ := p.user(c)
	data := map[string]any{"Done": c.Query("done")}
	if id, err := strconv.ParseUint(c.Query("template"), 10, 64); err == nil && id > 0 {
		t, err := p.operator.Template(c.Request.Context(), s.caller, id)
		if err != nil {
			p.fail(c, err)
			return
		}
		data["Template"] = t
	}
	p.render(c, http.StatusOK, "console-coupons", data)
}

func (p *Pages) createTemplate(c *gin.Context) {
	s, _ := p.user(c)
	discount, err1 := parseAmount(c.PostForm("discount"))
	minOrder, err2 := parseAmount(c.DefaultPostForm("min_order", "0"))
	days, err3 := strconv.Atoi(c.DefaultPostForm("valid_days", "30"))
	name := strings.TrimSpace(c.PostForm("name"))
	if err1 != nil || err2 != nil || err3 != nil || name == "" {
		p.problem(c, http.StatusBadRequest, "Not a template", "Give a name, a discount and a minimum order such as 5.00, and the days a coupon is valid.")
		return
	}
	t, err := p.operator.CreateTemplate(c.Request.Context(), s.caller,
		upstream.Template{Name: name, DiscountAmount: discount, MinOrderAmount: minOrder, ValidDays: days})
	if err != nil {
		p.fail(c, err)
		return
	}
	p.log.InfoContext(c.Request.Context(), "coupon template created", "user_id", s.caller.UserID, "template_id", t.ID)
	c.Redirect(http.StatusSeeOther, fmt.Sprintf("/console/coupons?template=%d", t.ID))
}

func (p *Pages) issueCoupon(c *gin.Context) {
	s, _ := p.user(c)
	tmpl, err1 := strconv.ParseUint(c.PostForm("template_id"), 10, 64)
	user, err2 := strconv.ParseUint(c.PostForm("user_id"), 10, 64)
	if err1 != nil || err2 != nil || tmpl == 0 || user == 0 {
		p.problem(c, http.StatusBadRequest, "Not a coupon to issue", "Give a template number and a user number.")
		return
	}
	cp, err := p.operator.IssueCoupon(c.Request.Context(), s.caller, tmpl, user)
	if err != nil {
		p.fail(c, err)
		return
	}
	p.log.InfoContext(c.Request.Context(), "coupon issued", "user_id", s.caller.UserID, "coupon_id", cp.ID, "to_user", user)
	c.Redirect(http.StatusSeeOther, fmt.Sprintf("/console/coupons?template=%d&done=%s", tmpl,
		url.QueryEscape(fmt.Sprintf("Coupon #%d issued to user %d, valid until %s.", cp.ID, user, cp.ExpiresAt.Format("2006-01-02")))))
}

// parseAmount reads "12.50" (or "12", "12.5") as cents.
func parseAmount(s string) (int64, error) {
	s = strings.TrimSpace(s)
	units, frac, _ := strings.Cut(s, ".")
	if len(frac) > 2 || units == "" {
		return 0, fmt.Errorf("not an amount: %q", s)
	}
	u, err := strconv.ParseInt(units, 10, 64)
	if err != nil || u < 0 || u > 1e12 {
		return 0, fmt.Errorf("not an amount: %q", s)
	}
	cents := int64(0)
	if frac != "" {
		f, err := strconv.ParseInt(frac, 10, 64)
		if err != nil || f < 0 {
			return 0, fmt.Errorf("not an amount: %q", s)
		}
		if len(frac) == 1 {
			f *= 10
		}
		cents = f
	}
	return u*100 + cents, nil
}
