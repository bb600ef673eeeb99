package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/order/internal/httpapi"
	"github.com/oncemall/oncemall/services/order/internal/order"
)

// TestListOrdersShowsOnlyTheCallersOrders: GET /orders lists the verified
// caller's orders newest first, with their items, a page at a time through
// next; another user's orders never appear on any page, and one of them as
// the cursor is 404, as if it did not exist. Without a token it is 401.
func TestListOrdersShowsOnlyTheCallersOrders(t *testing.T) {
	s := newServer(t)
	p := s.Product(t, "Kettle", 1500, 100)
	var mine []string
	others := map[string]bool{}
	for i := range 5 {
		mine = append(mine, s.PlaceOrder(t, 7, order.Line{ProductID: p, Quantity: i + 1}).No)
		others[s.PlaceOrder(t, 8, order.Line{ProductID: p, Quantity: 1}).No] = true
	}
	list := func(query string) httpapi.OrderListResponse {
		t.Helper()
		rec := s.do(http.MethodGet, "/orders"+query, "7", "")
		if rec.Code != http.StatusOK {
			t.Fatalf("GET /orders%s: %d %s", query, rec.Code, rec.Body)
		}
		var out httpapi.OrderListResponse
		testenv.Must(t, json.Unmarshal(rec.Body.Bytes(), &out))
		return out
	}
	var got []string
	query := "?limit=2"
	for pages := 0; ; pages++ {
		page := list(query)
		for _, o := range page.Orders {
			if others[o.OrderNo] || o.UserID != 7 {
				t.Fatalf("user 7's list shows order %s of user %d", o.OrderNo, o.UserID)
			}
			if len(o.Items) != 1 || o.Items[0].Name != "Kettle" {
				t.Errorf("order %s listed with items %+v", o.OrderNo, o.Items)
			}
			got = append(got, o.OrderNo)
		}
		if page.Next == "" {
			break
		}
		if pages > 5 {
			t.Fatal("the pages do not end")
		}
		query = "?limit=2&before=" + page.Next
	}
	if len(got) != len(mine) {
		t.Fatalf("user 7's pages list %v, want their %d orders %v", got, len(mine), mine)
	}
	for i := range got {
		if got[i] != mine[len(mine)-1-i] {
			t.Fatalf("user 7's orders listed %v, want newest first %v", got, mine)
		}
	}
	if all := list(""); len(all.Orders) != 5 || all.Next != "" {
		t.Errorf("one default page: %d orders, next %q; want all 5 and no next", len(all.Orders), all.Next)
	}
	for other := range others {
		if rec := s.do(http.MethodGet, "/orders?before="+other, "7", ""); rec.Code != http.StatusNotFound {
			t.Errorf("another user's order as the cursor: %d %s, want 404", rec.Code, rec.Body)
		}
		break
	}
	if rec := s.do(http.MethodGet, "/orders?limit=101", "7", ""); rec.Code != http.StatusBadRequest {
		t.Errorf("limit=101: %d, want 400", rec.Code)
	}
	if rec := s.do(http.MethodGet, "/orders", "", ""); rec.Code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", rec.Code)
	}
	if rec := s.do(http.MethodGet, "/orders", "9", ""); rec.Code != http.StatusOK || rec.Body.String() != `{"orders":[]}` {
		t.Errorf("a user without orders: %d %s, want an empty list", rec.Code, rec.Body)
	}
}
