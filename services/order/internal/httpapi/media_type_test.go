package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"
)

// TestJSONBodiesMustBeSentAsJSON: a body sent as text, a form, XML or with
// no Content-Type is refused 415 problem+json, whatever it holds, and
// changes nothing: no order, no product, the stock as it was.
func TestJSONBodiesMustBeSentAsJSON(t *testing.T) {
	s := newServer(t)
	product := s.Product(t, "kettle", 1500, 10)
	orders, products := s.count(t, "orders"), s.count(t, "products")
	for _, typ := range []string{"text/plain", "application/x-www-form-urlencoded", "application/xml", "none"} {
		for _, r := range []request{
			{method: http.MethodPost, path: "/orders", user: "42", body: fmt.Sprintf(`{"items":[{"product_id":%d,"quantity":1}]}`, product)},
			{method: http.MethodPost, path: "/admin/products", auth: "Bearer " + adminToken, body: `{"brand":"b","name":"mug","model":"m1","price":100}`},
			{method: http.MethodPut, path: fmt.Sprintf("/admin/products/%d/stock", product), auth: "Bearer " + adminToken, body: `{"available":3}`},
		} {
			r.typ = typ
			rec := s.send(r)
			if rec.Code != http.StatusUnsupportedMediaType {
				t.Fatalf("%s %s sent as %s: %d %s, want 415", r.method, r.path, typ, rec.Code, rec.Body)
			}
			problemDoc(t, rec)
		}
	}
	if o, p, st := s.count(t, "orders"), s.count(t, "products"), s.Stock(t, product); o != orders || p != products || st != 10 {
		t.Fatalf("after the refusals: %d orders, %d products, stock %d; want %d, %d, 10", o, p, st, orders, products)
	}
	// The same bodies as JSON, with a charset, are taken.
	if rec := s.send(request{method: http.MethodPut, path: fmt.Sprintf("/admin/products/%d/stock", product), auth: "Bearer " + adminToken,
		body: `{"available":3}`, typ: "application/json; charset=utf-8"}); rec.Code != http.StatusOK {
		t.Fatalf("stock as application/json; charset=utf-8: %d %s", rec.Code, rec.Body)
	}
}
