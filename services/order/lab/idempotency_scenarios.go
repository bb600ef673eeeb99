package lab

// Incident 4, client retries and double submits: a network timeout or a
// double click sends POST /orders again while the first request is still
// running. The order API is wired as cmd/order wires it (order_api.go: the
// platform's gin server, the Idempotency-Key guard chosen by its mode and
// the form-token check in front of POST /orders, the record completed
// inside the order's transaction by store.CompleteInTx) on a throwaway
// database and Redis prefix, served by an in-process HTTP server, and 50
// clients send one request with one Idempotency-Key at once.

import (
	"bytes"
	"context"
	"fmt"
	"net/http"

	"github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/pkg/variant"
)

// DoubleSubmitClients is how many copies of one POST /orders race.
const DoubleSubmitClients = 50

// Incident4Title is incident 4's title in the lab's table.
const Incident4Title = "client retries / double submit"

// IdempotencyScenarios lists incident 4's double submit against the broken
// check-then-act guard and the Idempotency-Key middleware (the Redis entry
// guards, which need no order service, are scripts/tests/lab's).
func IdempotencyScenarios() []lab.Scenario {
	return []lab.Scenario{
		{Incident: 4, Variant: lab.Broken, WantHolds: false, Run: doubleSubmitScenario(lab.Broken, "i4b", variant.Broken)},
		{Incident: 4, Variant: lab.Fixed, WantHolds: true, Run: doubleSubmitScenario(lab.Fixed, "i4f", variant.Fixed)},
	}
}

// doubleSubmitScenario races DoubleSubmitClients copies of one POST /orders
// (one user, one Idempotency-Key, one body), then retries once more after
// they all answered, and counts the orders and their stock reservations in
// the database. The invariant: one order and one reservation for the key,
// every 201 the same body, and the late retry replayed with that body.
func doubleSubmitScenario(variant, suffix string, guard variant.Mode) func(context.Context, lab.Env) (lab.Result, error) {
	return func(ctx context.Context, env lab.Env) (lab.Result, error) {
		res := lab.Result{
			Incident: 4,
			Title:    Incident4Title,
			Variant:  variant,
			Injected: fmt.Sprintf("%d concurrent POST /orders, one Idempotency-Key (guard %s), then 1 late retry", DoubleSubmitClients, guard),
			Effect:   "orders for the key",
			Expected: "= 1, identical 201 bodies",
		}
		api, err := StartOrderAPI(ctx, env, suffix, OrderAPIConfig{Guard: guard})
		if err != nil {
			return res, err
		}
		defer api.Close()
		// Stock for every copy, so that only the guard decides how many
		// orders there are.
		product, err := api.CreateProduct(ctx, "double-submit", 1999, 10*DoubleSubmitClients)
		if err != nil {
			return res, err
		}

		const user = "4004"
		body := OrderBody(product, 1)
		key := "lab-" + env.Prefix + "-" + suffix
		env.Note("incident 4 %s: %d clients send one POST /orders with one key", variant, DoubleSubmitClients)
		replies, err := api.RaceOrders(ctx, DoubleSubmitClients, user, key, body)
		if err != nil {
			return res, err
		}
		late, err := api.PostOrder(ctx, user, key, body)
		if err != nil {
			return res, err
		}
		RecordReplies(env.Timeline, append(replies, late), func(i int) string {
			if i == len(replies) {
				return "late retry"
			}
			return fmt.Sprintf("client %02d", i+1)
		})
		env.Timeline.MarkDuplicates(1)
		ans := Summarise(append(replies, late))
		orders, err := api.Count(ctx, "orders")
		if err != nil {
			return res, err
		}
		reservations, err := api.Count(ctx, "stock_reservation")
		if err != nil {
			return res, err
		}
		res.Count = int(orders)
		res.Effect = fmt.Sprintf("orders for the key (stock reservations %d; answers: %d new 201, %d replayed, %d×409, %d other)",
			reservations, ans.Fresh, ans.Replayed, ans.Conflict, ans.Other)
		lateOK := late.Status == http.StatusCreated && late.Replayed && bytes.Equal(late.Body, ans.Body)
		res.Holds = orders == 1 && reservations == 1 && ans.Fresh == 1 && ans.Other == 0 && ans.Identical && lateOK
		return res, nil
	}
}
