// Package httpapi is the coupon service's HTTP interface: a user's own
// coupons, the lock and release the order service calls (/internal), and
// the operator routes (/admin: templates, issuing, reconciliation). Errors
// are answered in problem+json, mapped to their status in errors.go. The
// contract with the other services is docs/purchase-flow.md.
package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// Options are what the routes need besides the use cases.
type Options struct {
	// Log receives the errors the API answers with 500 (logged once, here).
	Log *slog.Logger
	// User guards the customer's routes: auth.Middleware, which verifies
	// the bearer token; the handlers answer only for its user (auth.User).
	// Without it they refuse every request.
	User gin.HandlerFunc
	// Admin guards the operator routes under /admin: auth's Operator, an
	// operator's token or the platform's ADMIN_TOKEN check
	// (platform.Wiring.Admin). Without it they refuse every request: an
	// operator route is never left open by omission.
	Admin gin.HandlerFunc
	// Internal guards the routes other services call, under /internal: the
	// platform's INTERNAL_TOKEN check (platform.Wiring.Internal). Without it
	// they refuse every request too.
	Internal gin.HandlerFunc
}

// API serves the coupon endpoints.
type API struct {
	app  *app.App
	opts Options
}

// New returns the API over a's use cases. It refuses a nil app.
func New(a *app.App, o Options) (*API, error) {
	if a == nil {
		return nil, errors.New("httpapi: the use cases are required")
	}
	return &API{app: a, opts: o}, nil
}

// Register installs the routes on r: the user's routes behind
// Options.User, the service routes behind Options.Internal and the
// operator routes behind Options.Admin.
func (api *API) Register(r gin.IRouter) {
	user := guard(api.opts.User, "customer routes are not enabled")
	r.GET("/coupons/:id", user, api.getCoupon)
	r.GET("/users/:id/coupons", user, api.userCoupons)

	internal := r.Group("/internal", guard(api.opts.Internal, "service routes are not enabled"))
	internal.POST("/coupons/:id/lock", api.lock)
	internal.POST("/coupons/:id/release", api.release)

	admin := r.Group("/admin", guard(api.opts.Admin, "operator routes are not enabled"))
	admin.POST("/coupon-templates", api.createTemplate)
	admin.GET("/coupon-templates/:id", api.getTemplate)
	admin.POST("/coupons", api.issueCoupon)
	admin.GET("/reconcile", api.reconcile)
}

// guard returns g, or a handler that refuses everything when g is nil.
func guard(g gin.HandlerFunc, detail string) gin.HandlerFunc {
	if g != nil {
		return g
	}
	return func(c *gin.Context) { problem.Abort(c, http.StatusForbidden, detail) }
}

type templateRequest struct {
	Name           string `json:"name"`
	DiscountAmount int64  `json:"discount_amount"`
	MinOrderAmount int64  `json:"min_order_amount"`
	// ValidDays is optional: 0 or absent is coupon.DefaultValidDays.
	ValidDays int `json:"valid_days"`
}

type templateResponse struct {
	ID             uint64 `json:"id"`
	Name           string `json:"name"`
	DiscountAmount int64  `json:"discount_amount"`
	MinOrderAmount int64  `json:"min_order_amount"`
	ValidDays      int    `json:"valid_days"`
	CreatedAt      string `json:"created_at"`
}

func toTemplateResponse(t coupon.Template) templateResponse {
	return templateResponse{ID: t.ID, Name: t.Name, DiscountAmount: t.DiscountAmount, MinOrderAmount: t.MinOrderAmount,
		ValidDays: t.ValidDays, CreatedAt: t.CreatedAt.UTC().Format(timeFormat)}
}

type issueRequest struct {
	TemplateID uint64 `json:"template_id"`
	UserID     uint64 `json:"user_id"`
}

type couponResponse struct {
	ID            uint64 `json:"id"`
	TemplateID    uint64 `json:"template_id"`
	UserID        uint64 `json:"user_id"`
	Status        string `json:"status"`
	LockedOrderNo string `json:"locked_order_no,omitempty"`
	LockedUntil   string `json:"locked_until,omitempty"`
	UsedOrderNo   string `json:"used_order_no,omitempty"`
	ExpiresAt     string `json:"expires_at"`
	CreatedAt     string `json:"created_at"`
	UpdatedAt     string `json:"updated_at"`
}

func toCouponResponse(c coupon.Coupon) couponResponse {
	return couponResponse{ID: c.ID, TemplateID: c.TemplateID, UserID: c.UserID, Status: string(c.Status),
		LockedOrderNo: c.LockedOrderNo, LockedUntil: formatOptional(c.LockedUntil), UsedOrderNo: c.UsedOrderNo,
		ExpiresAt: c.ExpiresAt.UTC().Format(timeFormat), CreatedAt: c.CreatedAt.UTC().Format(timeFormat),
		UpdatedAt: c.UpdatedAt.UTC().Format(timeFormat)}
}

type lockRequest struct {
	OrderNo     string `json:"order_no"`
	UserID      uint64 `json:"user_id"`
	OrderAmount int64  `json:"order_amount"`
	Attempt     string `json:"attempt,omitempty"`
}

type lockResponse struct {
	CouponID       uint64 `json:"coupon_id"`
	OrderNo        string `json:"order_no"`
	DiscountAmount int64  `json:"discount_amount"`
	LockedUntil    string `json:"locked_until"`
}

type releaseRequest struct {
	OrderNo string `json:"order_no"`
	Attempt string `json:"attempt,omitempty"`
}

type releaseResponse struct {
	Released bool `json:"released"`
}

type anomalyResponse struct {
	Kind        string `json:"kind"`
	OrderNo     string `json:"order_no,omitempty"`
	CouponID    uint64 `json:"coupon_id,omitempty"`
	Count       int    `json:"count,omitempty"`
	Reason      string `json:"reason,omitempty"`
	LockedUntil string `json:"locked_until,omitempty"`
}

type reconcileResponse struct {
	Anomalies []anomalyResponse `json:"anomalies"`
}

const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// formatOptional formats t, or nothing for the zero time.
func formatOptional(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeFormat)
}

func (api *API) createTemplate(c *gin.Context) {
	var req templateRequest
	if !httpserver.DecodeJSON(c, &req) {
		return
	}
	t, err := api.app.CreateTemplate(c.Request.Context(), coupon.Template{Name: req.Name, DiscountAmount: req.DiscountAmount,
		MinOrderAmount: req.MinOrderAmount, ValidDays: req.ValidDays})
	if err != nil {
		api.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, toTemplateResponse(t))
}

func (api *API) getTemplate(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	t, err := api.app.Template(c.Request.Context(), id)
	if err != nil {
		api.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toTemplateResponse(t))
}

func (api *API) issueCoupon(c *gin.Context) {
	var req issueRequest
	if !httpserver.DecodeJSON(c, &req) {
		return
	}
	if req.TemplateID == 0 || req.UserID == 0 {
		problem.Abort(c, http.StatusBadRequest, "template_id and user_id are required positive integers")
		return
	}
	cp, err := api.app.IssueCoupon(c.Request.Context(), req.TemplateID, req.UserID)
	if err != nil {
		api.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, toCouponResponse(cp))
}

// getCoupon answers a coupon to its owner only. Anyone else gets the same
// 404 as for a coupon that does not exist, so coupon ids cannot be probed.
func (api *API) getCoupon(c *gin.Context) {
	caller, id, ok := callerAndPathID(c)
	if !ok {
		return
	}
	cp, err := api.app.Coupon(c.Request.Context(), id)
	if err == nil && cp.UserID != caller {
		err = fmt.Errorf("coupon %d: %w", id, coupon.ErrNotFound)
	}
	if err != nil {
		api.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toCouponResponse(cp))
}

// userCoupons lists the caller's own coupons; another user's list is
// forbidden (the path names the user, so there is nothing to hide).
func (api *API) userCoupons(c *gin.Context) {
	caller, id, ok := callerAndPathID(c)
	if !ok {
		return
	}
	if id != caller {
		problem.Abort(c, http.StatusForbidden, fmt.Sprintf("user %d may list only their own coupons", caller))
		return
	}
	cs, err := api.app.UserCoupons(c.Request.Context(), id)
	if err != nil {
		api.fail(c, err)
		return
	}
	out := make([]couponResponse, len(cs))
	for i, cp := range cs {
		out[i] = toCouponResponse(cp)
	}
	c.JSON(http.StatusOK, gin.H{"coupons": out})
}

// lock locks the coupon for the order being placed. A refusal is 422 with
// its reason (see errors.go); a retry by the holder gets the same lock.
func (api *API) lock(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	var req lockRequest
	if !httpserver.DecodeJSON(c, &req) {
		return
	}
	l, err := api.app.LockCoupon(c.Request.Context(), id, coupon.LockRequest{OrderNo: req.OrderNo, UserID: req.UserID,
		OrderAmount: req.OrderAmount, Attempt: req.Attempt})
	if err != nil {
		api.refuseOrFail(c, err)
		return
	}
	c.JSON(http.StatusOK, lockResponse{CouponID: l.CouponID, OrderNo: l.OrderNo, DiscountAmount: l.DiscountAmount,
		LockedUntil: l.LockedUntil.UTC().Format(timeFormat)})
}

// release releases the lock the order holds, if it holds one.
func (api *API) release(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	var req releaseRequest
	if !httpserver.DecodeJSON(c, &req) {
		return
	}
	released, err := api.app.ReleaseLock(c.Request.Context(), id, req.OrderNo, req.Attempt)
	if err != nil {
		api.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, releaseResponse{Released: released})
}

func (api *API) reconcile(c *gin.Context) {
	as, err := api.app.Reconcile(c.Request.Context())
	if err != nil {
		api.fail(c, err)
		return
	}
	out := reconcileResponse{Anomalies: make([]anomalyResponse, len(as))}
	for i, a := range as {
		out.Anomalies[i] = anomalyResponse{Kind: string(a.Kind), OrderNo: a.OrderNo, CouponID: a.CouponID, Count: a.Count,
			Reason: a.Reason, LockedUntil: formatOptional(a.LockedUntil)}
	}
	c.JSON(http.StatusOK, out)
}

// callerID is the caller, the user of the token Options.User verified;
// without one it answers 401.
func callerID(c *gin.Context) (uint64, bool) {
	p, ok := auth.User(c)
	if !ok {
		problem.Abort(c, http.StatusUnauthorized, "a verified access token is required")
		return 0, false
	}
	return p.UserID, true
}

// callerAndPathID reads the caller (callerID) and the path's id (pathID);
// false when either was refused.
func callerAndPathID(c *gin.Context) (caller, id uint64, ok bool) {
	if caller, ok = callerID(c); ok {
		id, ok = pathID(c)
	}
	return caller, id, ok
}

func pathID(c *gin.Context) (uint64, bool) {
	id, err := strconv.ParseUint(c.Param("id"), 10, 64)
	if err != nil || id == 0 {
		problem.Abort(c, http.StatusBadRequest, fmt.Sprintf("id %q is not a positive integer", c.Param("id")))
		return 0, false
	}
	return id, true
}
