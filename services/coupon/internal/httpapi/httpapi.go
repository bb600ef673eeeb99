// Package httpapi is the coupon service's HTTP interface: templates, issuing
// and reading coupons, and the admin reconciliation report. Errors are
// answered in problem+json, mapped to their status in errors.go.
package httpapi

import (
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// Options are what the routes need besides the use cases.
type Options struct {
	// Log receives the errors the API answers with 500 (logged once, here).
	Log *slog.Logger
	// Admin guards the operator routes under /admin: the platform's
	// ADMIN_TOKEN check (platform.Wiring.Admin). Without it they refuse
	// every request: an operator route is never left open by omission.
	Admin gin.HandlerFunc
}

// API serves the coupon endpoints.
type API struct {
	app  *app.App
	opts Options
}

// New returns the API over a's use cases.
func New(a *app.App, opts Options) *API { return &API{app: a, opts: opts} }

// Register installs the routes on r, the operator ones behind Options.Admin.
func (h *API) Register(r gin.IRouter) {
	r.POST("/coupon-templates", h.createTemplate)
	r.GET("/coupon-templates/:id", h.getTemplate)
	r.POST("/coupons", h.issueCoupon)
	r.GET("/coupons/:id", h.getCoupon)
	r.GET("/users/:id/coupons", h.userCoupons)
	guard := h.opts.Admin
	if guard == nil {
		guard = func(c *gin.Context) { problem.Abort(c, http.StatusForbidden, "operator routes are not enabled") }
	}
	admin := r.Group("/admin", guard)
	admin.GET("/reconcile", h.reconcile)
}

type templateRequest struct {
	Name           string `json:"name"`
	DiscountAmount int64  `json:"discount_amount"`
	MinOrderAmount int64  `json:"min_order_amount"`
}

type templateResponse struct {
	ID             uint64 `json:"id"`
	Name           string `json:"name"`
	DiscountAmount int64  `json:"discount_amount"`
	MinOrderAmount int64  `json:"min_order_amount"`
	CreatedAt      string `json:"created_at"`
}

func toTemplateResponse(t coupon.Template) templateResponse {
	return templateResponse{ID: t.ID, Name: t.Name, DiscountAmount: t.DiscountAmount, MinOrderAmount: t.MinOrderAmount,
		CreatedAt: t.CreatedAt.UTC().Format(timeFormat)}
}

type issueRequest struct {
	TemplateID uint64 `json:"template_id"`
	UserID     uint64 `json:"user_id"`
}

type couponResponse struct {
	ID          uint64 `json:"id"`
	TemplateID  uint64 `json:"template_id"`
	UserID      uint64 `json:"user_id"`
	Status      string `json:"status"`
	UsedOrderNo string `json:"used_order_no,omitempty"`
	CreatedAt   string `json:"created_at"`
	UpdatedAt   string `json:"updated_at"`
}

func toCouponResponse(c coupon.Coupon) couponResponse {
	return couponResponse{ID: c.ID, TemplateID: c.TemplateID, UserID: c.UserID, Status: string(c.Status),
		UsedOrderNo: c.UsedOrderNo, CreatedAt: c.CreatedAt.UTC().Format(timeFormat), UpdatedAt: c.UpdatedAt.UTC().Format(timeFormat)}
}

type anomalyResponse struct {
	Kind     string `json:"kind"`
	OrderNo  string `json:"order_no,omitempty"`
	CouponID uint64 `json:"coupon_id,omitempty"`
	Count    int    `json:"count,omitempty"`
}

type reconcileResponse struct {
	Anomalies []anomalyResponse `json:"anomalies"`
}

const timeFormat = "2006-01-02T15:04:05.000Z07:00"

func (h *API) createTemplate(c *gin.Context) {
	var req templateRequest
	if !httpserver.DecodeJSON(c, &req) {
		return
	}
	t, err := h.app.CreateTemplate(c.Request.Context(), coupon.Template{Name: req.Name, DiscountAmount: req.DiscountAmount, MinOrderAmount: req.MinOrderAmount})
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, toTemplateResponse(t))
}

func (h *API) getTemplate(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	t, err := h.app.Template(c.Request.Context(), id)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toTemplateResponse(t))
}

func (h *API) issueCoupon(c *gin.Context) {
	var req issueRequest
	if !httpserver.DecodeJSON(c, &req) {
		return
	}
	if req.TemplateID == 0 || req.UserID == 0 {
		problem.Abort(c, http.StatusBadRequest, "template_id and user_id are required positive integers")
		return
	}
	cp, err := h.app.IssueCoupon(c.Request.Context(), req.TemplateID, req.UserID)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, toCouponResponse(cp))
}

func (h *API) getCoupon(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	cp, err := h.app.Coupon(c.Request.Context(), id)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toCouponResponse(cp))
}

func (h *API) userCoupons(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	cs, err := h.app.UserCoupons(c.Request.Context(), id)
	if err != nil {
		h.fail(c, err)
		return
	}
	out := make([]couponResponse, len(cs))
	for i, cp := range cs {
		out[i] = toCouponResponse(cp)
	}
	c.JSON(http.StatusOK, gin.H{"coupons": out})
}

func (h *API) reconcile(c *gin.Context) {
	as, err := h.app.Reconcile(c.Request.Context())
	if err != nil {
		h.fail(c, err)
		return
	}
	out := reconcileResponse{Anomalies: make([]anomalyResponse, len(as))}
	for i, a := range as {
		out.Anomalies[i] = anomalyResponse{Kind: string(a.Kind), OrderNo: a.OrderNo, CouponID: a.CouponID, Count: a.Count}
	}
	c.JSON(http.StatusOK, out)
}

func pathID(c *gin.Context) (uint64, bool) {
	id, err := strconv.ParseUint(c.Param("id"), 10, 64)
	if err != nil || id == 0 {
		problem.Abort(c, http.StatusBadRequest, fmt.Sprintf("id %q is not a positive integer", c.Param("id")))
		return 0, false
	}
	return id, true
}
