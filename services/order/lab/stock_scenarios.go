package lab

// Incident 5, overselling: a flash sale puts 10 units of one product on
// sale and 100 customers order it in the same moment. The order API is
// wired as cmd/order wires it (order_api.go), with ORDER_STOCK_MODE set to
// the variant; the 100 POST /orders (each its own user and Idempotency-Key)
// are held at the server until all have arrived, then counted in the
// database: units sold (reservations), orders, and the stock left.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/order/internal/httpapi"
)

// The flash sale of incident 5.
const (
	OversellClients = 100
	OversellStock   = 10
)

// VariantOptimistic is incident 5's third variant: the version
// compare-and-set (ORDER_STOCK_MODE=optimistic).
const VariantOptimistic = "optimistic"

const incident5Title = "overselling"

// StockScenarios lists incident 5: the flash sale against the broken
// read-modify-write, the conditional decrement, and the optimistic lock.
// Both fixes must sell exactly the stock.
func StockScenarios() []lab.Scenario {
	return []lab.Scenario{
		{Incident: 5, Variant: lab.Broken, WantHolds: false, Run: oversellScenario(lab.Broken, "i5b", variant.Broken)},
		{Incident: 5, Variant: lab.Fixed, WantHolds: true, WantCount: OversellStock, Run: oversellScenario(lab.Fixed, "i5f", variant.Fixed)},
		{Incident: 5, Variant: VariantOptimistic, WantHolds: true, WantCount: OversellStock, Run: oversellScenario(VariantOptimistic, "i5o", Optimistic)},
	}
}

// FlashSale is what one run of the flash sale left behind.
type FlashSale struct {
	// Sold is the units reserved (one per order here), read from
	// stock_reservation; Orders the orders written; Available the stock
	// left in product_stock.
	Sold, Orders, Available int
	// Created, OutOfStock, Contention and Other split the answers: 201, 409
	// for lack of stock, 409 after the optimistic variant gave up, and
	// anything else.
	Created, OutOfStock, Contention, Other int
	// Conflicts is how many compare-and-sets the optimistic variant lost
	// (and retried its transaction after); zero in the other variants.
	Conflicts int
	// Replies are the answers, the i-th client's at i.
	Replies []Reply
}

// Holds reports the invariant of incident 5 for a sale of stock units: no
// more sold than there was, every unit either sold or still available, one
// unit per 201, and every other answer a 409.
func (f FlashSale) Holds(stock int) bool {
	return f.Sold <= stock && f.Sold+f.Available == stock && f.Orders == f.Sold && f.Created == f.Sold && f.Other == 0
}

// RunFlashSale puts stock units of a new product on sale on api and races
// clients single-unit orders for it, each from its own user with its own
// Idempotency-Key.
func RunFlashSale(ctx context.Context, api *OrderAPI, name string, stock, clients int) (FlashSale, error) {
	var f FlashSale
	product, err := api.CreateProduct(ctx, name, 4999, stock)
	if err != nil {
		return f, err
	}
	conflictsBefore, err := api.Counter("order_stock_decisions_total", map[string]string{"outcome": "conflict"})
	if err != nil {
		return f, err
	}
	body := OrderBody(product, 1)
	replies, err := api.Race(ctx, clients, func(i int) OrderRequest {
		return OrderRequest{User: strconv.Itoa(5000 + i), Key: fmt.Sprintf("%s-%d", name, i), Body: body}
	})
	if err != nil {
		return f, err
	}
	f.Replies = replies
	for _, r := range replies {
		switch {
		case r.Status == http.StatusCreated:
			f.Created++
		case r.Status == http.StatusConflict && problemCode(r.Body) == httpapi.CodeStockContention:
			f.Contention++
		case r.Status == http.StatusConflict:
			f.OutOfStock++
		default:
			f.Other++
		}
	}
	db := api.DB.WithContext(ctx)
	if err := db.Raw("SELECT COALESCE(SUM(quantity), 0) FROM stock_reservation WHERE product_id = ?", product).Scan(&f.Sold).Error; err != nil {
		return f, err
	}
	if err := db.Raw("SELECT COUNT(DISTINCT order_no) FROM order_items WHERE product_id = ?", product).Scan(&f.Orders).Error; err != nil {
		return f, err
	}
	if err := db.Raw("SELECT available FROM product_stock WHERE product_id = ?", product).Scan(&f.Available).Error; err != nil {
		return f, err
	}
	conflicts, err := api.Counter("order_stock_decisions_total", map[string]string{"outcome": "conflict"})
	f.Conflicts = int(conflicts - conflictsBefore)
	return f, err
}

// oversellScenario runs the flash sale on a rig named by suffix with the
// stock mode given.
func oversellScenario(name, suffix string, mode variant.Mode) func(context.Context, lab.Env) (lab.Result, error) {
	return func(ctx context.Context, env lab.Env) (lab.Result, error) {
		res := lab.Result{
			Incident: 5,
			Title:    incident5Title,
			Variant:  name,
			Injected: fmt.Sprintf("%d concurrent POST /orders of 1 unit, one product with stock %d (ORDER_STOCK_MODE=%s)", OversellClients, OversellStock, mode),
			Effect:   "units sold",
			Expected: fmt.Sprintf("= %d, stock left 0", OversellStock),
		}
		api, err := StartOrderAPI(ctx, env, suffix, OrderAPIConfig{Guard: variant.Fixed, Stock: mode, Clients: OversellClients})
		if err != nil {
			return res, err
		}
		defer api.Close()
		env.Note("incident 5 %s: %d clients order the last %d units at once", name, OversellClients, OversellStock)
		f, err := RunFlashSale(ctx, api, "flash-"+suffix, OversellStock, OversellClients)
		if err != nil {
			return res, err
		}
		RecordReplies(env.Timeline, f.Replies, func(i int) string { return fmt.Sprintf("customer %03d", i+1) })
		env.Timeline.MarkDuplicates(OversellStock)
		res.Count = f.Sold
		res.Effect = fmt.Sprintf("units sold (%d orders, stock left %d; %d×201, %d×409 out of stock", f.Orders, f.Available, f.Created, f.OutOfStock)
		if mode == Optimistic {
			res.Effect += fmt.Sprintf(", %d×409 gave up; %d lost compare-and-sets retried", f.Contention, f.Conflicts)
		}
		if f.Other > 0 {
			res.Effect += fmt.Sprintf(", %d other", f.Other)
		}
		res.Effect += ")"
		res.Holds = f.Holds(OversellStock) && f.Sold == OversellStock
		return res, nil
	}
}

// problemCode is the code member of a problem document (empty if none).
func problemCode(body []byte) string {
	var doc struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(body, &doc)
	return doc.Code
}
