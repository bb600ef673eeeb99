package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// The operator's calls: the services' /admin APIs, made with the operator's
// own access token (the services let a token with the operator role in).

// NewProduct is a product to add to the catalog.
type NewProduct struct {
	Brand string `json:"brand"`
	Name  string `json:"name"`
	Model string `json:"model"`
	Price int64  `json:"price"`
}

// CreateProduct adds p to the catalog (order POST /admin/products).
func (c *Client) CreateProduct(ctx context.Context, who Caller, p NewProduct) (Product, error) {
	var out Product
	_, err := c.do(ctx, call{service: "order", base: c.urls.Order, method: http.MethodPost, path: "/admin/products",
		caller: &who, json: p, out: &out})
	return out, err
}

// SetStock sets the units of product id that can be ordered (order PUT
// /admin/products/{id}/stock).
func (c *Client) SetStock(ctx context.Context, who Caller, id uint64, available int64) error {
	_, err := c.do(ctx, call{service: "order", base: c.urls.Order, method: http.MethodPut,
		path: "/admin/products/" + strconv.FormatUint(id, 10) + "/stock", caller: &who,
		json: map[string]int64{"available": available}})
	return err
}

// Template is a coupon template.
type Template struct {
	ID             uint64 `json:"id"`
	Name           string `json:"name"`
	DiscountAmount int64  `json:"discount_amount"`
	MinOrderAmount int64  `json:"min_order_amount"`
	ValidDays      int    `json:"valid_days"`
}

// CreateTemplate creates a coupon template (coupon POST
// /admin/coupon-templates); t.ID is ignored.
func (c *Client) CreateTemplate(ctx context.Context, who Caller, t Template) (Template, error) {
	var out Template
	_, err := c.do(ctx, call{service: "coupon", base: c.urls.Coupon, method: http.MethodPost, path: "/admin/coupon-templates",
		caller: &who, json: map[string]any{"name": t.Name, "discount_amount": t.DiscountAmount,
			"min_order_amount": t.MinOrderAmount, "valid_days": t.ValidDays}, out: &out})
	return out, err
}

// Template returns coupon template id (coupon GET /admin/coupon-templates/{id}).
func (c *Client) Template(ctx context.Context, who Caller, id uint64) (Template, error) {
	var out Template
	_, err := c.do(ctx, call{service: "coupon", base: c.urls.Coupon, method: http.MethodGet,
		path: "/admin/coupon-templates/" + strconv.FormatUint(id, 10), caller: &who, out: &out})
	return out, err
}

// IssueCoupon issues a coupon of template to user (coupon POST /admin/coupons).
func (c *Client) IssueCoupon(ctx context.Context, who Caller, template, user uint64) (Coupon, error) {
	var out Coupon
	_, err := c.do(ctx, call{service: "coupon", base: c.urls.Coupon, method: http.MethodPost, path: "/admin/coupons",
		caller: &who, json: map[string]uint64{"template_id": template, "user_id": user}, out: &out})
	return out, err
}

// Finding is one of a reconciler's findings: its kind and what it names.
type Finding struct {
	Kind   string
	Detail string // "order_no=… coupon_id=…", the finding's fields
}

// Findings asks service's reconciler (GET /admin/reconcile) for its
// findings; none is every invariant holding. The order and coupon services
// answer a list of anomalies, the payment service a list per kind.
func (c *Client) Findings(ctx context.Context, who Caller, service string) ([]Finding, error) {
	base := map[string]string{"order": c.urls.Order, "coupon": c.urls.Coupon, "payment": c.urls.Payment}[service]
	if base == "" {
		return nil, fmt.Errorf("no reconciler of service %q", service)
	}
	var out struct {
		Anomalies []map[string]any           `json:"anomalies"`
		Report    map[string]json.RawMessage `json:"report"`
	}
	if _, err := c.do(ctx, call{service: service, base: base, method: http.MethodGet, path: "/admin/reconcile",
		caller: &who, out: &out}); err != nil {
		return nil, err
	}
	var list []Finding
	for _, a := range out.Anomalies {
		kind, _ := a["kind"].(string)
		delete(a, "kind")
		list = append(list, Finding{Kind: kind, Detail: fields(a)})
	}
	kinds := make([]string, 0, len(out.Report))
	for k := range out.Report {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, kind := range kinds {
		var items []any
		if err := json.Unmarshal(out.Report[kind], &items); err != nil {
			return nil, &Error{Service: service, Method: http.MethodGet, Path: "/admin/reconcile",
				Err: fmt.Errorf("report %s is not a list: %w", kind, err)}
		}
		for _, it := range items {
			detail := fmt.Sprint(it)
			if m, ok := it.(map[string]any); ok {
				detail = fields(m)
			}
			list = append(list, Finding{Kind: kind, Detail: detail})
		}
	}
	return list, nil
}

// fields writes m as "key=value" words in key order.
func fields(m map[string]any) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		v := m[k]
		if f, ok := v.(float64); ok && f == float64(int64(f)) {
			v = int64(f)
		}
		parts[i] = fmt.Sprintf("%s=%v", k, v)
	}
	return strings.Join(parts, " ")
}
